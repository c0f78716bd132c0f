"""The model judge, opt-in (docs/judge.md, docs/adr/0149): a model asked, through one of
the engines we already have, which of an output's claims its source supports and which
of the source's key points it misses.

- ``template``: the judge's own template (``judge_template.json``) and its conversations
- ``verdict``: the reply parsed and checked, and the rule that makes a row unfaithful
- ``run``: the submit/poll loop over any generation engine

``synthfactory judge`` (synthfactory/judge.py) runs it over a Parquet table. Nothing in
the pipeline calls it: it is off unless someone runs it.
"""

from synthfactory.quality.judge.run import Pair, judge
from synthfactory.quality.judge.template import JudgeTemplate, load_judge_template
from synthfactory.quality.judge.verdict import (
    FAITHFUL,
    REASON,
    UNFAITHFUL,
    UNPARSED,
    JudgeVerdict,
    parse_reply,
)

__all__ = ["FAITHFUL", "REASON", "UNFAITHFUL", "UNPARSED", "JudgeTemplate", "JudgeVerdict",
           "Pair", "judge", "load_judge_template", "parse_reply"]
