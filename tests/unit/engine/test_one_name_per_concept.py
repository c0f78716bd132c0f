"""One name per concept (docs/adr/0137, 0151): a run folder is ``--run``, the price of a
device-hour ``--gpu-hour-usd``, the OpenAI-compatible engine ``--engine endpoint``,
botocore's attempts per S3 request ``crawl --request-attempts``.

Each former spelling still parses to the same value and prints exactly one deprecation
line; ``--help`` shows none of them; and every option of every subcommand whose value is
a run folder is spelt ``--run``, so a new one spelt otherwise fails here.
"""

from __future__ import annotations

import argparse
import re

import pytest

from synthfactory import cli
from synthfactory.cli_alias import _DeprecatedFlag, deprecation_line
from synthfactory.rephrase.engine_registry import ALIASES, REGISTRY, engine_kind

RUN = "file:///data/run"
STITCH = ["--manifest", f"{RUN}/manifest", "--templates", "qa", "--shard-tokens", "4096"]
SWEEP = ["--shard", f"{RUN}/prompts/shard-00000.parquet", "--grid", "[{}]",
         "--out", "file:///data/sweep"]

# (command, the other options it needs, old spelling, new spelling, value, dest, parsed)
FORMER = [
    ("rephrase", ["--shard", f"{RUN}/prompts/shard-00000.parquet"], "--out", "--run", RUN,
     "run", RUN),
    ("stitch", STITCH, "--out", "--run", RUN, "run", RUN),
    ("smoke", [], "--from-run", "--run", RUN, "run", RUN),
    ("estimate", ["--tokens", "1e9", "--gpus", "8"], "--from-run", "--run", RUN, "run", RUN),
    ("report", ["--run", RUN], "--gpu-hour-price", "--gpu-hour-usd", "3.5", "gpu_hour_usd",
     3.5),
    ("sweep", SWEEP, "--gpu-hour-cost", "--gpu-hour-usd", "3.5", "gpu_hour_usd", 3.5),
    # --max-attempts is rephrase's attempts per row; crawl's was botocore's (issue 51)
    ("crawl", ["--source", "file:///seeds", "--out", f"{RUN}/manifest"], "--max-attempts",
     "--request-attempts", "4", "request_attempts", 4),
    # the name of the Param that feeds it (issue 51)
    ("plan", ["--run", RUN], "--max-groups", "--max-shard-groups", "3", "max_shard_groups", 3),
]
# every run folder a subcommand reads or writes, named by the option --run
RUN_FOLDER_COMMANDS = ("stitch", "plan", "rephrase", "validate", "join", "register",
                       "audit", "smoke", "report", "estimate")


def _parse(capsys, name: str, argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    args = cli.build_parser(name).parse_args(argv)
    return args, [line for line in capsys.readouterr().err.splitlines() if line.strip()]


@pytest.mark.parametrize(("name", "rest", "old", "new", "value", "dest", "parsed"), FORMER,
                         ids=[f"{f[0]} {f[2]}" for f in FORMER])
def test_a_former_spelling_parses_the_same_and_says_so_once(capsys, name, rest, old, new,
                                                             value, dest, parsed):
    args, said = _parse(capsys, name, [*rest, old, value])
    assert getattr(args, dest) == parsed
    assert said == [f"synthfactory {name}: {old} is deprecated, use {new}"]
    assert said == [deprecation_line(f"synthfactory {name}", old, new)]
    glued, said = _parse(capsys, name, [*rest, f"{old}={value}"])  # --flag=VALUE too
    assert getattr(glued, dest) == parsed and len(said) == 1
    now, said = _parse(capsys, name, [*rest, new, value])
    assert vars(now) == vars(args) and said == []  # the new spelling: same args, silent


@pytest.mark.parametrize("name", ["rephrase", "sweep"])
def test_engine_openai_is_engine_endpoint_and_says_so_once(capsys, name):
    rest = {"rephrase": ["--shard", f"{RUN}/prompts/shard-00000.parquet"], "sweep": SWEEP}[name]
    args, said = _parse(capsys, name, [*rest, "--engine", "openai"])
    assert args.engine == "endpoint"
    assert said == [f"synthfactory {name}: --engine openai is deprecated, "
                    "use --engine endpoint"]
    now, said = _parse(capsys, name, [*rest, "--engine", "endpoint"])
    assert vars(now) == vars(args) and said == []
    default, said = _parse(capsys, name, rest)
    assert default.engine == "vllm" and said == []


def test_the_registry_knows_the_endpoint_by_its_one_name():
    assert ALIASES == {"openai": "endpoint"}
    assert set(ALIASES).isdisjoint(REGISTRY) and set(ALIASES.values()) <= set(REGISTRY)
    assert engine_kind("openai") is engine_kind("endpoint") is REGISTRY["endpoint"]


def test_a_former_spelling_runs_the_step_as_the_new_one(capsys, tmp_path):
    """Through the console's main: the deprecation line first, then the step's own
    behaviour, here its one-line error naming the flag by its new name."""
    argv = ["estimate", "--tokens", "1e9", "--from-run", str(tmp_path), "--gpus", "8"]
    assert cli.main(argv) == 3
    old = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert cli.main([a if a != "--from-run" else "--run" for a in argv]) == 3
    new = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    line = "synthfactory estimate: --from-run is deprecated, use --run"
    assert old[0] == line and old.count(line) == 1 and line not in new
    assert old[-1] == new[-1]
    assert new[-1].startswith(f"synthfactory estimate: error: --run {tmp_path}: no report")


def test_a_required_flag_is_still_required_without_its_former_spelling(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.build_parser("stitch").parse_args(STITCH)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "the following arguments are required: --run" in err and "--out" not in err


def _options(parser: argparse.ArgumentParser):
    """Every option of ``parser`` and of its subcommands' parsers (``model prepare``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _options(sub)
        elif action.option_strings:
            yield parser, action


def test_help_shows_no_former_spelling():
    shown_anywhere = []
    for name in cli.COMMANDS:
        parser = cli.build_parser(name)
        text = parser.format_help()
        hidden = [o for _, a in _options(parser) if isinstance(a, _DeprecatedFlag)
                  for o in a.option_strings]
        shown = [o for o in hidden if re.search(rf"{re.escape(o)}(?![\w-])", text)]
        shown_anywhere += [f"{name} {o}" for o in shown]
        if "openai" in text:
            shown_anywhere.append(f"{name} openai")
    assert shown_anywhere == []
    hidden = {(name, o) for name in cli.COMMANDS for _, a in _options(cli.build_parser(name))
              if isinstance(a, _DeprecatedFlag) for o in a.option_strings}
    assert hidden == {(f[0], f[2]) for f in FORMER}  # every alias is tested above


def misnamed_run_options(name: str, parser: argparse.ArgumentParser) -> list[str]:
    """Visible options of ``parser`` whose help starts by calling the value a run's URL or
    folder ("run URL ...", "a run folder with ..."), spelt other than ``--run``."""
    misnamed = []
    for _, action in _options(parser):
        if action.help == argparse.SUPPRESS or isinstance(action, _DeprecatedFlag):
            continue
        if (re.match(r"(a |the )?run (url|folder)\b", (action.help or "").lower())
                and action.option_strings != ["--run"]):
            misnamed.append(f"{name} {'/'.join(action.option_strings)}: {action.help}")
    return misnamed


def test_every_run_folder_is_named_by_the_run_option():
    """A subcommand that reads or writes a run folder takes it as --run, and no other
    visible option of any subcommand names a run folder."""
    misnamed = []
    for name in cli.COMMANDS:
        parser = cli.build_parser(name)
        options = {o: a for _, a in _options(parser) for o in a.option_strings}
        if name in RUN_FOLDER_COMMANDS:
            assert "--run" in options and options["--run"].dest == "run", name
            assert options["--run"].help != argparse.SUPPRESS, name
        misnamed += misnamed_run_options(name, parser)
    assert misnamed == [], "a run folder's option is spelt --run (docs/adr/0137)"


def test_the_run_folder_check_sees_a_new_flag_spelt_otherwise():
    parser = cli.build_parser("join")
    parser.add_argument("--in-run", help="run URL of the run to join from")
    parser.add_argument("--pipeline", help="pipeline name (default: from the run URL)")
    assert misnamed_run_options("join", parser) == [
        "join --in-run: run URL of the run to join from"]


def test_every_price_of_a_device_hour_is_gpu_hour_usd():
    prices = sorted({(name, o) for name in cli.COMMANDS
                     for _, a in _options(cli.build_parser(name))
                     if not isinstance(a, _DeprecatedFlag)
                     for o in a.option_strings if o.startswith("--gpu-hour")})
    assert prices == [("estimate", "--gpu-hour-usd"), ("report", "--gpu-hour-usd"),
                      ("sweep", "--gpu-hour-usd")]


# A Param whose name is not its flag's, each with why (issue 51: otherwise a Param has the
# name of the flag it feeds, or that name after what it configures: spark_master feeds
# stitch's --master, smoke_steps smoke's --steps, in a form that holds every step's knobs)
PARAM_NOT_FLAG = {
    ("export", "--out"): "export_url: every step's output option is --out; the form has one "
                         "export, and its value is a URL",
    ("export", "--hub-repo"): "hub_repo_id: the Hub's own word for it (repo_id)",
}


def test_a_param_has_the_name_of_the_flag_it_feeds():
    from synthfactory.contract import step_table

    differ = {(step.name, flag.name): flag.param
              for step in step_table.STEPS.values() for flag in step.flags
              if flag.param and flag.param != flag.dest
              and not flag.param.endswith("_" + flag.dest)}
    assert differ.keys() == PARAM_NOT_FLAG.keys(), differ
