"""Benchmark decontamination: the gate's ``contaminated`` reason.

A row is contaminated when its output, or its source, shares a word n-gram (words as
the gate's other checks see them: ``checks.words``, lower-cased) with a text of one of
the team's benchmarks: the test datatrove's and NeMo Curator's decontamination make,
at their n of 13 by default (docs/decontamination.md).

The benchmarks are a folder (file:// or s3://) of Parquet or JSON Lines files, one
benchmark per file, named by its file's stem, in the shape they come in (GSM8K's
question and answer, MMLU's question and choices): the columns read are the ones the
user names (``--benchmark-columns``), else every column of strings or of lists of
strings; each string is a text of its own. Every file's columns are checked from its
schema alone before any file's rows are read (``check_files``: validate's index, and plan
before the rephrase wave, so a bad column costs no GPU work), and the index records which
were read. The index is built once per validate task from hashed n-grams: every word
hashed to 64 bits once (blake2b, stable across processes and machines), each n-gram a
polynomial of its words' hashes mod 2^64, kept as one sorted ``uint64`` array (8 bytes
an n-gram, plus 4 for its benchmark). The files are streamed a record batch at a time,
so memory holds the index, one file's n-gram hashes and one batch, never the benchmark
texts. At 1M n-grams a false match of a row of 1,000 n-grams has odds of about 1 in
2^64 / 10^9; what matched is named in the verdict.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.json as pajson
import pyarrow.parquet as pq

from synthfactory import storage
from synthfactory.errors import RetryableError, SynthfactoryError
from synthfactory.quality.checks import words

DEFAULT_N = 13  # datatrove's and NeMo Curator's n
MIN_N = 5  # below it, common phrases ("one of the most important") match everything
SUFFIXES = {".parquet": "parquet", ".jsonl": "json", ".json": "json"}
_BASE = np.uint64(0x100000001B3)  # the polynomial's base (odd: a bijection mod 2^64)
_BATCH_ROWS = 4096


def check_n(n: int) -> int:
    if n < MIN_N:
        raise SynthfactoryError(f"--decontaminate-n {n}: at least {MIN_N} (shorter n-grams "
                                "are common phrases, not a benchmark's text)")
    return n


class WordHashes:
    """A word -> its 64-bit hash, each word hashed once."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def __call__(self, tokens: list[str]) -> np.ndarray:
        seen = self._seen
        out = np.empty(len(tokens), dtype=np.uint64)
        for i, word in enumerate(tokens):
            value = seen.get(word)
            if value is None:
                value = seen[word] = int.from_bytes(
                    hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
            out[i] = value
        return out


def ngram_hashes(word_hashes: np.ndarray, n: int) -> np.ndarray:
    """Each window of n words' hashes folded into one: sum w[i+j] * B^(n-1-j) mod 2^64
    (numpy's uint64 arithmetic wraps)."""
    count = len(word_hashes) - n + 1
    if count <= 0:
        return np.empty(0, dtype=np.uint64)
    out = np.zeros(count, dtype=np.uint64)
    for j in range(n):
        out = out * _BASE + word_hashes[j:j + count]
    return out


@dataclass
class IndexStats:
    benchmarks: int
    texts: int  # strings read (a list's each), null ones too
    ngrams: int  # distinct (n-gram, benchmark) pairs
    index_bytes: int
    build_s: float
    columns: dict[str, list[str]] = field(default_factory=dict)  # benchmark -> columns read

    def line(self, url: str, n: int) -> str:
        read = "; ".join(f"{name}: {', '.join(cols)}" for name, cols in self.columns.items())
        return (f"benchmarks {url}: {self.benchmarks} file(s), {self.texts} texts, "
                f"{self.ngrams} distinct {n}-grams, {self.index_bytes / 2**20:.1f} MiB, "
                f"built in {self.build_s:.2f} s; columns read: {read or 'none'}")


@dataclass
class BenchmarkIndex:
    n: int
    names: list[str]
    keys: np.ndarray  # sorted distinct n-gram hashes
    owner: np.ndarray  # int32: a benchmark's number, or len(names) + k: shared[k]
    shared: list[tuple[int, ...]] = field(default_factory=list)
    stats: IndexStats | None = None
    url: str = ""
    columns: dict[str, list[str]] = field(default_factory=dict)  # benchmark -> columns read
    _words: WordHashes = field(default_factory=WordHashes)

    def matches(self, text: str) -> list[str]:
        """The benchmarks sharing an n-gram with the text, sorted by name."""
        grams = ngram_hashes(self._words(words(text)), self.n)
        if not grams.size or not self.keys.size:
            return []
        at = np.searchsorted(self.keys, grams)
        at[at == self.keys.size] = 0
        hit = self.keys[at] == grams
        if not hit.any():
            return []
        found: set[int] = set()
        for owner in np.unique(self.owner[at[hit]]).tolist():
            found.update(self.shared[owner - len(self.names)] if owner >= len(self.names)
                         else (owner,))
        return sorted(self.names[i] for i in found)

    def described(self) -> dict:
        """What validation/*.json records of the check (docs/contracts.md)."""
        return {"url": self.url, "n": self.n, "benchmarks": list(self.names),
                "columns": {name: list(self.columns.get(name, [])) for name in self.names}}

    @property
    def nbytes(self) -> int:
        return int(self.keys.nbytes + self.owner.nbytes)


def benchmark_files(url: str) -> list[tuple[str, str]]:
    """(name, URL) of each benchmark file: a folder's .parquet/.jsonl/.json files, or one
    such file."""
    url = storage.normalize(url)
    try:
        if storage.is_dir(url):
            files = sorted(u for u in storage.list_files(url)
                           if any(u.endswith(s) for s in SUFFIXES))
        elif storage.exists(url):
            files = [url]
        else:
            raise SynthfactoryError(f"--benchmarks {url}: no such folder or file")
    except OSError as exc:
        raise SynthfactoryError(f"--benchmarks {url}: cannot be listed ({exc})") from exc
    if not files:
        raise SynthfactoryError(f"--benchmarks {url}: no benchmark files (*.parquet, *.jsonl "
                                "or *.json, one benchmark per file)")
    out = []
    for file in files:
        base = file.rsplit("/", 1)[-1]
        suffix = next((s for s in SUFFIXES if base.endswith(s)), None)
        if suffix is None:
            raise SynthfactoryError(f"--benchmarks {file}: not a .parquet, .jsonl or .json "
                                    "file")
        out.append((base[:-len(suffix)], file))
    names = [name for name, _ in out]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise SynthfactoryError(f"--benchmarks {url}: two files name the benchmark(s) "
                                f"{', '.join(twice)} (one file per benchmark)")
    return out


@contextmanager
def _reading(file: str) -> Iterator[None]:
    """A file that cannot be read is one line naming it."""
    try:
        yield
    except FileNotFoundError as exc:
        raise SynthfactoryError(f"--benchmarks {file}: not found") from exc
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SynthfactoryError(f"--benchmarks {file}: unreadable ({_first_line(exc)})") from exc
    except OSError as exc:
        # S3's OSError is the network or the service, which may pass; a local one (a
        # folder of that name, no permission) reads the same way next time
        kind = RetryableError if storage.scheme(file) == "s3" else SynthfactoryError
        raise kind(f"--benchmarks {file}: unreadable ({_first_line(exc)})") from exc


def _schema(file: str) -> pa.Schema:
    """The file's columns: a Parquet file's footer, a JSON Lines file's first block."""
    fs, path = storage.filesystem(file)
    with _reading(file), fs.open_input_file(path) as stream:
        if file.endswith(".parquet"):
            return pq.read_schema(stream)
        return pajson.open_json(stream).schema


def _batches(file: str, columns: list[str]) -> Iterator[pa.RecordBatch]:
    """The file's ``columns``, a record batch at a time, streamed from its filesystem."""
    fs, path = storage.filesystem(file)
    with _reading(file), fs.open_input_file(path) as stream:
        if file.endswith(".parquet"):
            yield from pq.ParquetFile(stream).iter_batches(batch_size=_BATCH_ROWS,
                                                           columns=columns)
        else:
            for batch in pajson.open_json(stream):
                yield batch.select(columns)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _is_text(kind: pa.DataType) -> bool:
    """Strings, or lists of them (nested lists too): MMLU's ``choices``."""
    if pa.types.is_dictionary(kind):
        return _is_text(kind.value_type)
    if (pa.types.is_list(kind) or pa.types.is_large_list(kind)
            or pa.types.is_fixed_size_list(kind)):
        return _is_text(kind.value_type)
    return (pa.types.is_string(kind) or pa.types.is_large_string(kind)
            or pa.types.is_string_view(kind))


def text_columns(file: str, schema: pa.Schema, named: Sequence[str] | None) -> list[str]:
    """The columns of ``file`` to read: the ``named`` ones, each there and of text (a
    column of nulls too: it holds no text yet), else every column of text; a file that
    fails this is one line naming it, its problem and its columns."""
    columns = schema.names
    listed = f"columns: {', '.join(columns) or 'none'}"
    if not named:
        chosen = [f.name for f in schema if _is_text(f.type)]
        if not chosen:
            raise SynthfactoryError(
                f"--benchmarks {file}: no column of strings or lists of strings to read "
                f"({listed})")
        return chosen
    missing = [name for name in named if name not in columns]
    if missing:
        raise SynthfactoryError(
            f"--benchmarks {file}: no column {', '.join(map(repr, missing))} ({listed}); "
            "--benchmark-columns names it")
    for name in named:
        kind = schema.field(name).type
        if not (_is_text(kind) or pa.types.is_null(kind)):
            texts = [f.name for f in schema if _is_text(f.type)]
            raise SynthfactoryError(
                f"--benchmarks {file}: column {name!r} holds {kind}, not strings or lists "
                f"of strings ({listed}; of strings: {', '.join(texts) or 'none'}); "
                "--benchmark-columns names it")
    return list(named)


def named_columns(flag: str | None) -> list[str] | None:
    """``--benchmark-columns``' value (``NAME[,NAME...]``, None: unset) as names."""
    return flag.split(",") if flag else None


def check_files(url: str, columns: Sequence[str] | None = None
                ) -> list[tuple[str, str, list[str]]]:
    """(name, URL, columns to read) of each benchmark file under ``url``, from the files'
    schemas alone (``_schema``): no row is read. One line naming a file that cannot be
    read, lacks a named column or has no text. Validate's ``build`` runs it before reading
    any file's rows; plan runs it before the rephrase wave (the same check, earlier)."""
    return [(name, file, text_columns(file, _schema(file), columns))
            for name, file in benchmark_files(url)]


def _texts(batch: pa.RecordBatch) -> Iterator[str | None]:
    """Every string of the batch's columns, a list's each on its own."""
    for column in batch.columns:
        while isinstance(column, pa.ListArray | pa.LargeListArray | pa.FixedSizeListArray):
            column = column.flatten()  # the strings of the non-null lists, in order
        if isinstance(column, pa.DictionaryArray):
            column = column.dictionary_decode()
        yield from column.to_pylist()


def build(url: str, n: int = DEFAULT_N,
          columns: Sequence[str] | None = None) -> BenchmarkIndex:
    """The index of every benchmark file under ``url``, from ``columns`` of each (default:
    every column of strings or lists of strings). One line naming a file that cannot be
    read, lacks a named column or has no text, before any file's rows are read and so
    before any row is judged."""
    check_n(n)
    started = time.perf_counter()
    files = check_files(url, columns)
    read = {name: chosen for name, _, chosen in files}
    word_hashes = WordHashes()
    keys: list[np.ndarray] = []
    owners: list[np.ndarray] = []
    texts = 0
    for number, (_, file, chosen) in enumerate(files):
        grams: list[np.ndarray] = []
        for batch in _batches(file, chosen):
            for text in _texts(batch):
                texts += 1
                if text:
                    grams.append(ngram_hashes(word_hashes(words(text)), n))
        distinct = np.unique(np.concatenate(grams)) if grams else np.empty(0, np.uint64)
        keys.append(distinct)
        owners.append(np.full(distinct.size, number, dtype=np.int32))
    all_keys = np.concatenate(keys) if keys else np.empty(0, np.uint64)
    all_owners = np.concatenate(owners) if owners else np.empty(0, np.int32)
    order = np.lexsort((all_owners, all_keys))
    all_keys, all_owners = all_keys[order], all_owners[order]
    unique, first, counts = np.unique(all_keys, return_index=True, return_counts=True)
    owner = all_owners[first].copy()
    shared: list[tuple[int, ...]] = []
    sets: dict[tuple[int, ...], int] = {}
    for i in np.flatnonzero(counts > 1).tolist():  # an n-gram in several benchmarks
        key = tuple(all_owners[first[i]:first[i] + counts[i]].tolist())
        if key not in sets:
            sets[key] = len(files) + len(shared)
            shared.append(key)
        owner[i] = sets[key]
    index = BenchmarkIndex(n, [name for name, _, _ in files], unique, owner, shared,
                           url=storage.normalize(url), columns=read, _words=word_hashes)
    index.stats = IndexStats(len(files), texts, int(all_keys.size), index.nbytes,
                             time.perf_counter() - started, read)
    return index
