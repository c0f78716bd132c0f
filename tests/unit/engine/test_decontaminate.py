"""The gate's decontamination check on made-up benchmark files: a planted verbatim
question, a paraphrase that keeps one 13-gram and a near miss that keeps only a 12-gram;
the source's contamination, several benchmarks, n, and the index's size. Benchmark files
in the shape they come in (GSM8K's question and answer, MMLU's question, subject,
choices and answer): every column of strings or lists of strings is read, or the ones
``--benchmark-columns`` names, and the index says which; a named column missing or not
text, or a file without text, is one line and exit 3 from the real command line before
any row is gated."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from synthfactory import cli, storage
from synthfactory.quality import decontaminate
from synthfactory.quality.gate import Row, assess
from synthfactory.quality_bounds import Bounds
from synthfactory.rephrase.engines import EchoEngine
from synthfactory.rephrase.worker import WorkerOptions, rephrase_shard
from tests.support.shards import write_prompt_shard

SCRIPT = Path(sys.executable).with_name("synthfactory")  # .venv-worker/bin/synthfactory

# Made up for these tests, in the shape of a grade-school maths benchmark item.
QUESTION = ("A baker fills twelve trays with nine rolls each, and then gives away a third "
            "of the rolls to the shelter. How many rolls does the baker keep for the "
            "morning market?")
TRIVIA = "Which river carries the most water into the Sea of Okhotsk every single spring season?"
SOURCE = ("Bread has been baked in clay ovens for thousands of years. Early bakers ground "
          "grain between stones and mixed the flour with water and wild yeast, and the "
          "loaves they made were dense, dark and kept for many days.")
REWRITE = ("Bakers have used clay ovens for millennia. They ground their grain on stones, "
           "mixed it with water and wild yeast, and baked heavy dark loaves that lasted.")
# shares exactly "a baker fills twelve trays with nine rolls each and then gives away"
PARAPHRASE_13 = REWRITE + (" In this story, a baker fills twelve trays with nine rolls "
                           "each and then gives away some bread.")
# shares "baker fills twelve trays with nine rolls each and then gives away": 12 words
NEAR_MISS_12 = REWRITE + (" In this story, the baker fills twelve trays with nine rolls "
                          "each and then gives away some bread.")


@pytest.fixture
def benchmarks(tmp_path):
    folder = tmp_path / "benchmarks"
    folder.mkdir()
    (folder / "bakery_math.jsonl").write_text(
        json.dumps({"text": QUESTION + " Answer: 72"}) + "\n"
        + json.dumps({"text": "Two trains leave the same station an hour apart."}) + "\n")
    pq.write_table(pa.table({"text": [TRIVIA, None]}), folder / "river_trivia.parquet")
    return f"file://{folder}"


def judge(index, output, source=SOURCE):
    [verdict] = assess([Row(source, output, "stop", None)], lambda _t: Bounds(),
                       benchmarks=index)
    return verdict


def test_the_three_planted_rows(benchmarks):
    index = decontaminate.build(benchmarks)  # n = 13
    verbatim = judge(index, REWRITE + " " + QUESTION)
    assert "contaminated" in verbatim.reasons and verbatim.contaminated_by == ["bakery_math"]
    kept_13 = judge(index, PARAPHRASE_13)
    assert "contaminated" in kept_13.reasons and kept_13.contaminated_by == ["bakery_math"]
    near_miss = judge(index, NEAR_MISS_12)
    assert "contaminated" not in near_miss.reasons and near_miss.contaminated_by == []
    # n is the team's: at 12 the near miss is caught
    assert judge(decontaminate.build(benchmarks, 12), NEAR_MISS_12).contaminated_by == [
        "bakery_math"]


def test_words_are_normalised_as_the_gate_does(benchmarks):
    index = decontaminate.build(benchmarks)
    shouting = QUESTION.upper().replace(",", " ;").replace("?", "!!")
    assert judge(index, REWRITE + " " + shouting).contaminated_by == ["bakery_math"]


def test_a_contaminated_source_rejects_its_row(benchmarks):
    index = decontaminate.build(benchmarks)
    verdict = judge(index, REWRITE, source=TRIVIA + " " + SOURCE)
    assert verdict.reasons == ["contaminated"] and verdict.contaminated_by == ["river_trivia"]
    assert judge(index, REWRITE).reasons == []  # the same row, clean: usable


def test_an_ngram_in_two_benchmarks_names_both(benchmarks, tmp_path):
    folder = tmp_path / "benchmarks"
    (folder / "copy_of_trivia.jsonl").write_text(json.dumps({"text": TRIVIA}) + "\n")
    index = decontaminate.build(benchmarks)
    assert judge(index, REWRITE + " " + TRIVIA).contaminated_by == [
        "copy_of_trivia", "river_trivia"]
    assert judge(index, QUESTION).contaminated_by == ["bakery_math"]


def test_the_index_is_hashed_ngrams_and_says_its_size(benchmarks):
    index = decontaminate.build(benchmarks)
    question_words = len(decontaminate.words(QUESTION + " Answer: 72"))
    trivia_words = len(decontaminate.words(TRIVIA))
    distinct = (question_words - 12) + (trivia_words - 12)  # the trains text: 8 words, none
    assert index.stats.ngrams == distinct and index.keys.size == distinct
    assert index.stats.index_bytes == distinct * 12  # 8-byte hash + 4-byte benchmark
    assert index.stats.texts == 4 and index.stats.benchmarks == 2


def test_no_benchmarks_no_check():
    assert judge(None, REWRITE + " " + QUESTION).contaminated_by == []


def test_n_below_five_is_refused():
    with pytest.raises(decontaminate.SynthfactoryError, match="at least 5"):
        decontaminate.check_n(4)


def test_the_fixture_reads_its_text_columns_and_says_so(benchmarks):
    index = decontaminate.build(benchmarks)
    assert index.described()["columns"] == {"bakery_math": ["text"], "river_trivia": ["text"]}
    assert index.stats.line(benchmarks, 13).endswith(
        "columns read: bakery_math: text; river_trivia: text")


# Made up for these tests, in the shapes of GSM8K (question, answer: the worked solution)
# and MMLU (question, subject, choices: a list of strings, answer: the right choice's
# number). Each text is long enough to hold 13-grams; none shares one with another.
GSM_QUESTION = ("Nadia packs forty seven jars of plum jam into crates that hold six jars "
                "each and keeps the jars left over for her neighbours. How many jars does "
                "she keep?")
GSM_ANSWER = ("Seven full crates take forty two of the jars, which leaves five jars over, "
              "so the neighbours of Nadia receive five jars of jam. #### 5")
MMLU_QUESTION = ("For which instrument did the invented composer Arvid Lunde write the only "
                 "concerto of his that survives in the archive?")
MMLU_CHOICE = ("The viola da gamba, tuned a fourth lower than usual and played resting on "
               "the knees of a seated player")
MMLU_OTHER = ("A glass harmonica built from forty nested bowls that turn on a single iron "
              "rod under wet fingertips")


@pytest.fixture
def shaped(tmp_path):
    """gsm8k.jsonl and mmlu.parquet as they come: no text column."""
    folder = tmp_path / "shaped"
    folder.mkdir()
    (folder / "gsm8k.jsonl").write_text(
        json.dumps({"question": GSM_QUESTION, "answer": GSM_ANSWER}) + "\n"
        + json.dumps({"question": "What is two and two?", "answer": "four #### 4"}) + "\n")
    pq.write_table(pa.table({
        "question": [MMLU_QUESTION, "Which is odd?"],
        "subject": ["music_history", "arithmetic"],
        "choices": pa.array([[MMLU_OTHER, MMLU_CHOICE, "A lute", "A sackbut"], None],
                            pa.list_(pa.string())),
        "answer": pa.array([1, 0], pa.int64())}), folder / "mmlu.parquet")
    return f"file://{folder}"


def test_every_column_of_text_is_read_and_named(shaped):
    index = decontaminate.build(shaped)
    assert index.described()["columns"] == {
        "gsm8k": ["question", "answer"], "mmlu": ["question", "subject", "choices"]}
    # 2 x 2 strings of gsm8k; mmlu: 2 questions, 2 subjects, 4 choices (a null list: none)
    assert index.stats.texts == 4 + 8
    assert index.stats.line(shaped, 13).endswith(
        "columns read: gsm8k: question, answer; mmlu: question, subject, choices")
    for quoted, benchmark in ((GSM_QUESTION, "gsm8k"), (GSM_ANSWER, "gsm8k"),
                              (MMLU_QUESTION, "mmlu"), (MMLU_CHOICE, "mmlu"),
                              (MMLU_OTHER, "mmlu")):
        verdict = judge(index, REWRITE + " " + quoted)
        assert verdict.contaminated_by == [benchmark], quoted
        assert "contaminated" in verdict.reasons
    # a choice is a text of its own: words that run from one choice into the next are
    # no n-gram of the benchmark
    seam = " ".join(MMLU_OTHER.split()[-6:] + MMLU_CHOICE.split()[:7])
    assert judge(index, REWRITE + " " + seam).contaminated_by == []
    assert judge(index, REWRITE).contaminated_by == []


def test_named_columns_are_the_only_ones_read(shaped):
    index = decontaminate.build(shaped, columns=["question"])
    assert index.described()["columns"] == {"gsm8k": ["question"], "mmlu": ["question"]}
    assert judge(index, REWRITE + " " + GSM_QUESTION).contaminated_by == ["gsm8k"]
    assert judge(index, REWRITE + " " + MMLU_QUESTION).contaminated_by == ["mmlu"]
    for unread in (GSM_ANSWER, MMLU_CHOICE):  # quoted, but from a column not read
        verdict = judge(index, REWRITE + " " + unread)
        assert verdict.contaminated_by == [] and "contaminated" not in verdict.reasons


def test_every_file_is_checked_before_any_is_read(shaped, tmp_path, monkeypatch):
    """A bad file after good ones fails before the good ones are streamed."""
    pq.write_table(pa.table({"id": [1, 2], "label": [0, 1]}),
                   tmp_path / "shaped" / "zzz_numbers.parquet")
    read = []
    streamed = decontaminate._batches
    monkeypatch.setattr(decontaminate, "_batches",
                        lambda file, columns: read.append(file) or streamed(file, columns))
    with pytest.raises(decontaminate.SynthfactoryError, match="zzz_numbers.parquet: no "
                       "column of strings or lists of strings to read"):
        decontaminate.build(shaped)
    assert read == []


# -- the command line: validate over a committed shard -----------------------------------

def _committed_run(tmp_path) -> tuple[str, str]:
    """A run whose shard 0 the echo engine rephrased: four rows, whose sources read
    "document number N alpha beta gamma ...", not yet validated."""
    run = f"file://{tmp_path}/run"
    shard = write_prompt_shard(run, 0, rows=4)
    rephrase_shard(shard, None, lambda: EchoEngine(), WorkerOptions(model="echo"))
    return run, shard


def _command(tmp_path, *argv: str, **env: str) -> subprocess.CompletedProcess:
    """The real console script, ``synthfactory ARGV``, its home in tmp_path."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SYNTHFACTORY_", "AWS_"))}
    return subprocess.run([str(SCRIPT), *argv], cwd=tmp_path, text=True,
                          env={**clean, "SYNTHFACTORY_HOME": str(tmp_path), **env},
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=120)


def _validate(tmp_path, *argv: str) -> tuple[int, str]:
    """(exit code, stderr) of the real console script."""
    done = _command(tmp_path, "validate", *argv)
    return done.returncode, done.stderr


@pytest.mark.parametrize("named, contaminated, columns", [
    (None, {0: ["gsm8k"]}, {"gsm8k": ["question", "answer"]}),
    ("question", {}, {"gsm8k": ["question"]}),  # row 0 quotes the answer only
], ids=["every-text-column", "named-columns"])
def test_validate_reads_the_columns_and_says_which(tmp_path, named, contaminated, columns):
    run, shard = _committed_run(tmp_path)
    bench = tmp_path / "bench"
    bench.mkdir()
    pq.write_table(pa.table({  # the answer quotes row 0's source: "document number 0 ..."
        "question": ["How many documents does the library keep on its shelves?"],
        "answer": ["It keeps document number 0 alpha beta, and no other. #### 1"]}),
        bench / "gsm8k.parquet")
    code, stderr = _validate(tmp_path, "--shard", shard, "--benchmarks", f"file://{bench}",
                             "--decontaminate-n", "5",
                             *([f"--benchmark-columns={named}"] if named else []))
    assert code == 0, stderr[-2000:]
    shown = "; ".join(f"{name}: {', '.join(cols)}" for name, cols in columns.items())
    assert f"columns read: {shown}" in stderr  # the log line
    validation = storage.read_json(f"{run}/validation/shard-00000.json")
    assert validation["decontamination"]["columns"] == columns
    verdicts = storage.read_table(f"{run}/verdicts/shard-00000.parquet").to_pylist()
    assert {v["row"]: v["contaminated_by"] for v in verdicts if v["contaminated_by"]} == \
        contaminated
    assert validation["quality"]["contaminated_by"] == {
        name: 1 for names in contaminated.values() for name in names}


BAD_BENCHMARKS = {
    "named-column-missing": (
        "gsm8k.parquet", {"question": ["Q?"], "answer": ["A."]}, ["--benchmark-columns=prompt"],
        "gsm8k.parquet: no column 'prompt' (columns: question, answer)"),
    "named-column-not-text": (
        "mmlu.parquet", {"question": ["Q?"], "subject": ["s"], "choices": [["a", "b"]],
                         "answer": [1]}, ["--benchmark-columns", "question, answer"],
        "mmlu.parquet: column 'answer' holds int64, not strings or lists of strings "
        "(columns: question, subject, choices, answer; of strings: question, subject, "
        "choices)"),
    "no-text-at-all": (
        "numbers.jsonl", {"id": [1], "label": [0]}, [],
        "numbers.jsonl: no column of strings or lists of strings to read (columns: id, "
        "label)"),
}


def _bench_folder(tmp_path, case: str | None) -> Path:
    """A good file (every column a case names is there) and, but for None, the case's
    bad one after it."""
    bench = tmp_path / "bench"
    bench.mkdir()
    pq.write_table(pa.table({
        "question": [GSM_QUESTION], "answer": [GSM_ANSWER], "prompt": [MMLU_QUESTION]}),
        bench / "a_good.parquet")
    if case is not None:
        file, columns, _, _ = BAD_BENCHMARKS[case]
        if file.endswith(".jsonl"):
            (bench / file).write_text(json.dumps({k: v[0] for k, v in columns.items()}) + "\n")
        else:
            pq.write_table(pa.table(columns), bench / file)
    return bench


def _one_error_line(step: str, stderr: str, bench: Path, case: str) -> None:
    _, _, flags, problem = BAD_BENCHMARKS[case]
    assert "Traceback" not in stderr, stderr[-4000:]
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines[-1] == f"synthfactory {step}: error: --benchmarks file://{bench}/{problem}" \
        + ("; --benchmark-columns names it" if flags else ""), lines[-1]
    assert [line for line in lines if "error" in line] == lines[-1:]  # one line


@pytest.mark.parametrize("case", sorted(BAD_BENCHMARKS))
def test_a_bad_benchmark_file_is_one_line_and_exit_3_before_any_row_is_gated(tmp_path, case):
    run, shard = _committed_run(tmp_path)
    bench = _bench_folder(tmp_path, case)
    code, stderr = _validate(tmp_path, "--shard", shard, "--benchmarks", f"file://{bench}",
                             *BAD_BENCHMARKS[case][2])
    assert code == 3, stderr[-2000:]
    _one_error_line("validate", stderr, bench, case)
    # before any row is gated: nothing of the shard's validation written
    for written in ("validation/shard-00000.json", "verdicts/shard-00000.parquet",
                    "rejected/shard-00000.parquet"):
        assert not storage.exists(f"{run}/{written}"), written


def _planned_run(tmp_path) -> str:
    """A run whose prompts/shards.json lists two shards (plan reads nothing else)."""
    run = f"file://{tmp_path}/run"
    storage.write_json(f"{run}/prompts/shards.json", {"shards": [
        {"name": f"shard-{i:05d}", "url": f"{run}/prompts/shard-{i:05d}.parquet",
         "rows": 2, "tokens": 100} for i in range(2)]})
    return run


def test_plan_passes_the_columns_on_to_every_validate(tmp_path, capsys):
    run = _planned_run(tmp_path)
    bench = tmp_path / "bench"
    bench.mkdir()
    pq.write_table(pa.table({"question": [MMLU_QUESTION], "choices": [[MMLU_CHOICE]]}),
                   bench / "mmlu.parquet")
    assert cli.main(["plan", "--run", run, "--max-shard-groups", "2", "--benchmarks",
                     f"file://{bench}", "--benchmark-columns", " question , choices,question",
                     "--", "--engine", "echo"]) == 0
    groups = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert len(groups) == 2
    for group in groups:
        assert "--benchmark-columns=question,choices" in group["validate"]
        args = cli.build_parser("validate").parse_args(group["validate"][1:])
        assert args.benchmark_columns == "question,choices"
    # unset: not passed on, and validate reads every column of text
    assert cli.main(["plan", "--run", run, "--max-shard-groups", "2", "--benchmarks",
                     f"file://{bench}", "--benchmark-columns=", "--", "--engine", "echo"]) == 0
    groups = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert not any(a.startswith("--benchmark-columns") for g in groups for a in g["validate"])
    assert cli.build_parser("validate").parse_args(
        groups[0]["validate"][1:]).benchmark_columns is None


# -- the command line: plan, before the rephrase wave ------------------------------------

def _plan(tmp_path, run: str, *flags: str) -> subprocess.CompletedProcess:
    """The real ``synthfactory plan``, its summary (the groups Airflow maps the rephrase
    tasks over) also in a result file, as in a DAG run."""
    return _command(tmp_path, "plan", "--run", run, "--max-shard-groups", "2", *flags, "--",
                    "--engine", "echo", SYNTHFACTORY_RESULT_FILE=str(tmp_path / "result.json"))


def _tree(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")}


@pytest.mark.parametrize("case", sorted(BAD_BENCHMARKS))
def test_plan_refuses_a_bad_benchmark_file_as_validate_does_before_any_rephrase(tmp_path,
                                                                                case):
    """In a DAG run validate starts after the GPU's rephrase: plan, before it, makes the
    same check (the files' schemas only) and fails the run with validate's line."""
    run = _planned_run(tmp_path)
    bench = _bench_folder(tmp_path, case)
    before = _tree(tmp_path)
    done = _plan(tmp_path, run, "--benchmarks", f"file://{bench}", *BAD_BENCHMARKS[case][2])
    assert done.returncode == 3, done.stderr[-2000:]
    _one_error_line("plan", done.stderr, bench, case)
    # nothing written: no groups (no rephrase task mapped), no result file, no file at all
    assert done.stdout == ""
    assert _tree(tmp_path) == before


def test_plan_with_good_benchmark_files_passes_them_on(tmp_path):
    run = _planned_run(tmp_path)
    bench = _bench_folder(tmp_path, None)
    for flags in ([], ["--benchmark-columns", "question,prompt"]):
        done = _plan(tmp_path, run, "--benchmarks", f"file://{bench}", *flags)
        assert done.returncode == 0, done.stderr[-2000:]
        groups = json.loads(done.stdout.splitlines()[-1])
        assert groups == json.loads((tmp_path / "result.json").read_text())
        assert len(groups) == 2
        assert all(f"--benchmarks=file://{bench}" in g["validate"] for g in groups)


def test_plan_refuses_decontaminate_n_below_5_as_validate_does(tmp_path):
    done = _plan(tmp_path, _planned_run(tmp_path), "--decontaminate-n", "4")
    assert done.returncode == 3, done.stderr[-2000:]
    assert done.stderr.splitlines()[-1] == (
        "synthfactory plan: error: --decontaminate-n 4: at least 5 (shorter n-grams are "
        "common phrases, not a benchmark's text)")
    assert done.stdout == "" and not (tmp_path / "result.json").exists()
