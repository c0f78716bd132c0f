"""The judge's own template: a JSON file with ``system`` and ``user`` text, the user text
holding ``{source}`` and ``{output}``; ``example``, the shape of a verdict, written into
the system text where it says ``{example}``; and ``max_tokens``, the budget of one verdict.

The example's lists hold placeholders (``<a claim ...>``), not claims: a small model
copies the example it is shown, and a copied placeholder is then recognised
(``example_texts``) and read as no verdict at all. An example with empty lists could
not be told apart from a real "nothing unsupported" when copied.

It is not a rephrase template (synthfactory/templates/): those ask for a rewrite and
declare the gate's bounds; this one asks for a verdict, and is read only by the judge.
The shipped one is ``judge_template.json`` beside this module; ``--judge-template PATH``
gives one of one's own, checked the same way before any row is read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from synthfactory.errors import PermanentError

SHIPPED = Path(__file__).with_name("judge_template.json")
PLACEHOLDERS = ("source", "output")
# one pass over the user text: a source that itself contains "{output}" (a Python
# f-string in a tutorial, a template's docs) must not have the output pasted into it, as
# a second str.replace would; and str.format would trip over any other brace it holds
_PLACEHOLDER = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")


@dataclass(frozen=True)
class JudgeTemplate:
    id: str
    system: str
    user: str
    max_tokens: int  # the default budget of one verdict (--max-tokens overrides it)
    example_texts: frozenset[str] = frozenset()  # the example's list items, normalised

    def conversation(self, source: str, output: str) -> list[dict]:
        """The chat the engine renders with the model's own chat template."""
        values = {"source": source, "output": output}
        user = _PLACEHOLDER.sub(lambda m: values[m.group(1)], self.user)
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]


def load_judge_template(path: str | Path | None = None) -> JudgeTemplate:
    """The template at ``path`` (default: the shipped one), or one line saying what is
    wrong with it."""
    where = Path(path) if path else SHIPPED
    name = f"--judge-template {where}" if path else str(where)
    try:
        data = json.loads(where.read_text())
    except FileNotFoundError:
        raise PermanentError(f"{name}: not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PermanentError(f"{name}: cannot read it ({exc})") from exc
    except json.JSONDecodeError as exc:
        raise PermanentError(f"{name}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise PermanentError(f"{name}: expected a JSON object")
    for key in ("id", "system", "user"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise PermanentError(f"{name}: {key!r} must be a non-empty string")
    absent = [p for p in PLACEHOLDERS if "{" + p + "}" not in data["user"]]
    if absent:
        raise PermanentError(f"{name}: the 'user' text lacks "
                             + ", ".join("{" + p + "}" for p in absent))
    system, examples = data["system"], frozenset()
    if "example" in data:
        example = data["example"]
        if not isinstance(example, dict) or "{example}" not in system:
            raise PermanentError(f"{name}: 'example' must be a JSON object, and the "
                                 "'system' text must say where it goes ({example})")
        system = system.replace("{example}", json.dumps(example))
        examples = frozenset(normalise(item) for value in example.values()
                             if isinstance(value, list) for item in value
                             if isinstance(item, str))
    budget = data.get("max_tokens", 256)
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise PermanentError(f"{name}: 'max_tokens' must be a positive integer, got "
                             f"{json.dumps(budget)}")
    return JudgeTemplate(data["id"], system, data["user"], budget, examples)


def normalise(text: str) -> str:
    """A list item as it is compared with the example's: case, spacing and the
    placeholder's angle brackets aside (a model drops or keeps them)."""
    return " ".join(text.strip().strip("<>").lower().split())
