"""Training smoke test on synthetic or real token lengths (docs/training-smoke.md).

Modules, one concern each: ``lengths`` (length specs), ``overlong`` (drop/truncate
policy), ``length_source`` (seeded, rank-aware, resumable draws), ``token_processors``,
``packing`` and ``loader`` (grain pipeline), ``run_data`` (reading a run's generated
parts), ``preview`` (figures for a spec), ``tiny_model`` and ``smoke`` (the training
loop). Only the command modules and ``loader``/``packing`` import grain, torch or
matplotlib, and only inside functions or modules that those commands import.
"""
