"""Run report: report.json and figures from a run folder (``synthfactory report``)."""
