"""Labelled (source, output) rows for testing whether the quality gate can tell a faithful
rephrasing from a fluent output that is not faithful to its source.

What it is: 18 hand-written seed documents, 4-5 per register (web: encyclopedic, news
and how-to pages; docs: Python and command-line documentation; code: prose around one
fenced ``python`` block; math: definitions, worked examples and word problems in LaTeX),
each 130-190 words, and 83 outputs written for them, every one labelled with a kind
(``KINDS``) and paired with the shipped template (synthfactory/templates/<id>.json) it
answers. Each output is written as a model answering that template would write it: its
shape (steps and a recap for a tutorial, one paragraph for a summary, commented code
for code_commented, numbered steps and a final answer for math_solution), one line per
paragraph, no chat preamble.

How it was made: the sources and outputs were written by hand for this set, the
unfaithful ones independently of any grounding check (not tuned to one). The facts of
a web source are real (the news item, Maplewood, is invented); every fact a faithful
output states can be checked in its source. Each output was then held against the
existing gate (``synthfactory.quality.gate.assess``, one row at a time, with its
template's bounds): every faithful row is usable, so is every unfaithful row except
three that the template's own checks already catch (math-speed-first-half and
math-arithmetic-other-document lose the source's numbers: numbers_lost;
code-csv-sum-other-document lacks the source's code: code_broken). The rest are what
the length, copying, repetition, language and domain checks cannot see. No two outputs
are near-duplicates, so assessing all rows together gives the same verdicts.

The kinds:
- faithful: a rephrasing that keeps every fact of its source, in the template's shape;
  it may reorder, restructure and simplify (a summary or distill condenses, a tutorial
  adds steps and a recap of the same facts).
- reworded: faithful, but with few words in common with the source (synonyms, other
  sentence structure); names, numbers, code and formulae stay as they are.
- added_paragraph: a faithful rephrase followed by one paragraph of 2-3 sentences the
  source never says (history, advice, a related tool; plausible and mostly true).
- changed_facts: a rephrase with the faithful one's structure in which some facts are
  changed: one number (a version, a count, a wait), one name (the parameter a version
  added), a name and a year (the building that overtook the tower), or a relation
  (which leg of a trip was slower, who pays most, --skip and --abort swapped, longer
  dance meaning closer food, simple and compound interest's definitions swapped, ties
  sorted alphabetically). The keep_code and keep_numbers templates keep their code and
  (nearly all) their numbers, so the change is in the prose.
- doubled_paragraph: a faithful rephrase in which one paragraph or block of sentences
  is written out twice, word for word or with a small change in the copy.
- first_half: a faithful rephrase of only the first half (up to about two thirds) of
  the source; the rest is missing.
- other_document: a fluent, faithful rephrase of another source of the set, of the same
  register, paired with this source (web-eiffel-other-document rephrases _MOLASSES,
  web-bike-lanes: _REPOT, web-waggle: _EIFFEL, web-molasses: _BIKE_LANES, docs-mkdir:
  _LRU_CACHE, docs-grep: _REBASE, docs-lru-cache: _PIP_INSTALL, docs-rebase: _MKDIR,
  code-csv-sum: _BISECT, math-arithmetic: _INTEREST).
"""

# The outputs are written as models write them, a paragraph to a line.
# ruff: noqa: E501

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Labelled:
    name: str        # unique, e.g. "web-eiffel-reworded"
    register: str    # "web", "docs", "code" or "math"
    template: str    # a shipped template id (synthfactory/templates/<id>.json)
    kind: str        # one of KINDS
    source: str
    output: str

    @property
    def faithful(self) -> bool:
        return self.kind in FAITHFUL


FAITHFUL = ("faithful", "reworded")
UNFAITHFUL = ("added_paragraph", "changed_facts", "doubled_paragraph", "first_half",
              "other_document")
KINDS = FAITHFUL + UNFAITHFUL

# -- the sources ------------------------------------------------------------------------

# web: encyclopedic, news and how-to pages

_EIFFEL = r"""The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. It is named after the engineer Gustave Eiffel, whose company designed and built the tower between 1887 and 1889 as the entrance arch to the 1889 World's Fair, held to mark the centenary of the French Revolution. The design itself came from two senior engineers at the company, Maurice Koechlin and Émile Nouguier, and the architect Stephen Sauvestre refined its appearance.

Many prominent artists and intellectuals criticised the tower when it was built, calling it useless and monstrous. It was originally meant to stand for only 20 years, but it was kept because it proved valuable as a radio transmission platform.

The tower is 330 metres tall, about the same height as an 81-storey building. It was the tallest man-made structure in the world until the Chrysler Building in New York City was finished in 1930. The tower has three levels for visitors, with restaurants on the first and second, and the upper platform of the top level is 276 metres above the ground."""

_BIKE_LANES = r"""MAPLEWOOD - The city council voted 7-2 on Tuesday night to approve a $4.2 million plan that will add 18 kilometres of protected bike lanes to the city's downtown and the neighbourhoods around it. Construction is set to begin in April and should be finished by the end of next year.

Most of the money will come from a state transportation grant, with the city covering about $900,000 from its own road maintenance budget. The lanes will be separated from car traffic by concrete curbs and planters, and 140 on-street parking spaces along Elm Street and Harbor Road will be removed to make room for them.

Supporters, including the local cycling group Pedal Maplewood, said the lanes would make riding safer after two cyclists were killed in crashes downtown last year. Several business owners on Elm Street spoke against the plan, warning that losing parking would drive customers away. Councillor Dana Ruiz, who voted no, said she supported bike lanes but wanted the city to build a parking garage first."""

_REPOT = r"""How to repot a houseplant

Most houseplants need a bigger pot every one to two years, when roots start growing out of the drainage holes or circling the bottom of the pot. Spring is the best time to repot, because the plant is starting to grow actively and recovers quickly.

Choose a new pot that is only 2 to 5 centimetres wider than the old one and has drainage holes. A pot that is much larger holds extra wet soil around the roots, which can cause root rot.

Water the plant a day before you repot it, so the root ball holds together. Turn the old pot on its side and gently slide the plant out, then loosen the outer roots with your fingers and trim any that are black or mushy. Put a layer of fresh potting mix in the new pot, set the plant so the top of the root ball sits about 2 centimetres below the rim, and fill in around it. Water thoroughly and keep the plant out of direct sun for about a week while it settles."""

_WAGGLE = r"""The waggle dance is a behaviour that honey bees use to tell other workers in the hive where to find food. A forager returning from a good patch of flowers walks in a straight line across the vertical comb while waggling her abdomen from side to side, then circles back to the starting point and repeats the run, alternating left and right loops.

The angle of the straight run relative to vertical shows the direction of the food relative to the sun. A run straight up the comb means the food lies in the direction of the sun, and a run 40 degrees to the right of vertical means the food is 40 degrees to the right of the sun. The duration of the waggle run encodes distance: the longer the run, the farther away the food is.

The Austrian biologist Karl von Frisch worked out the meaning of the dance in the 1940s. He shared the 1973 Nobel Prize in Physiology or Medicine with Konrad Lorenz and Nikolaas Tinbergen for his work on animal behaviour."""

_MOLASSES = r"""The Great Molasses Flood was a disaster that struck the North End of Boston, Massachusetts, on 15 January 1919. A large storage tank holding about 8.7 million litres of molasses burst, and a wave of the thick syrup up to 7.6 metres high rushed through the streets at roughly 56 kilometres per hour. It killed 21 people and injured about 150, and it damaged buildings and an elevated railway nearby.

The tank belonged to the Purity Distilling Company, which used the molasses to make industrial alcohol. Investigations afterwards found that it had been built poorly and was never properly tested; residents had complained that it leaked, and the company responded by painting it brown so the leaks were harder to see. A sharp rise in temperature the day before the disaster may have added to the pressure inside.

A long court case followed, and in 1925 the parent company was found responsible and paid about $628,000 in damages. The case helped lead to stricter rules in Massachusetts requiring engineers and architects to check and sign off on construction plans."""

# docs: Python and tool documentation

_MKDIR = r"""Path.mkdir(mode=0o777, parents=False, exist_ok=False)

Create a new directory at this given path. If mode is given, it is combined with the process's umask value to determine the file mode and access flags. If the path already exists, FileExistsError is raised.

If parents is true, any missing parents of this path are created as needed; they are created with the default permissions without taking mode into account (mimicking the POSIX mkdir -p command). If parents is false (the default), a missing parent raises FileNotFoundError.

If exist_ok is false (the default), FileExistsError is raised if the target directory already exists. If exist_ok is true, FileExistsError will not be raised unless the given path already exists in the file system and is not a directory (same behavior as the POSIX mkdir -p command).

Changed in version 3.5: The exist_ok parameter was added."""

_GREP = r"""grep searches each input FILE for lines that match a given PATTERN and prints every matching line to standard output. If no file is named, or if a file is given as -, grep reads standard input. By default the pattern is a basic regular expression; -E switches to extended regular expressions and -F treats the pattern as a fixed string.

Common options: -i ignores case distinctions in both the pattern and the input. -v inverts the match, selecting the lines that do not match. -n prefixes each output line with its line number within its file. -c suppresses normal output and prints only a count of matching lines for each file. -r reads all files under each directory, recursively. -l prints only the names of the files that contain a match.

Exit status: grep exits with 0 if a line is selected, 1 if no lines were selected, and 2 if an error occurred. However, if -q (quiet) is used and a line is selected, the exit status is 0 even if an error occurred."""

_LRU_CACHE = r"""@functools.lru_cache(maxsize=128, typed=False)

Decorator to wrap a function with a memoizing callable that saves up to the maxsize most recent calls. It can save time when an expensive or I/O bound function is periodically called with the same arguments. Because a dictionary is used to cache results, the positional and keyword arguments to the function must be hashable.

If maxsize is set to None, the LRU feature is disabled and the cache can grow without bound. If typed is set to true, function arguments of different types will be cached separately; for example, f(3) and f(3.0) will be treated as distinct calls with distinct results.

The wrapped function is instrumented with a cache_info() function that returns a named tuple showing hits, misses, maxsize and currsize. The decorator also provides a cache_clear() function for clearing or invalidating the cache.

New in version 3.2. Changed in version 3.8: Added the option to use lru_cache directly as a decorator, without parentheses."""

_REBASE = r"""git rebase [-i] [--onto <newbase>] [<upstream> [<branch>]]

Reapply commits on top of another base tip. If <branch> is given, git rebase first switches to it; otherwise it works on the current branch. All changes made by commits in the current branch but not in <upstream> are saved to a temporary area, the branch is reset to <upstream>, and the saved commits are then reapplied to it one by one, in order.

If a commit cannot be applied cleanly, the rebase stops and lets you resolve the conflict. After fixing the files, mark them as resolved with git add and run git rebase --continue. To skip the commit that caused the conflict, run git rebase --skip; to stop and return the branch to the state it was in before the rebase began, run git rebase --abort.

With -i (--interactive), git opens an editor with a list of the commits about to be rebased. Editing the list lets you reorder commits, drop them, or combine them with the squash and fixup commands before they are reapplied."""

_PIP_INSTALL = r"""pip install installs packages from the Python Package Index (PyPI) and other indexes, from version control URLs, from local project directories and from local or remote archive files. A requirement specifier such as "requests>=2.28,<3" limits which versions pip may choose.

-r <file>, --requirement <file>: install from the given requirements file. This option can be used multiple times.

-U, --upgrade: upgrade all specified packages to the newest available version. How dependencies are handled depends on the upgrade strategy; the default, only-if-needed, upgrades a dependency only when it no longer satisfies the requirements of the upgraded package.

-e, --editable <path/url>: install a project in editable mode (a "develop" install) from a local project path or a VCS URL, so that changes to its source take effect without reinstalling.

--no-deps: do not install package dependencies.

--dry-run: resolve the requirements and report what would be installed, without installing anything. This option was added in pip 22.2."""

# code: a fenced Python block with prose around it

_COUNTER = r"""Counting words with collections.Counter

The Counter class from the standard library's collections module is a dictionary subclass for counting hashable objects. The function below lowercases a text, splits it into words with a regular expression and returns the n most common words with their counts.

```python
import re
from collections import Counter


def top_words(text, n=3):
    words = re.findall(r"[a-z']+", text.lower())
    return Counter(words).most_common(n)


print(top_words("the cat and the hat and the bat"))
```

Running it prints [('the', 3), ('and', 2), ('cat', 1)]. most_common() orders the words from the most to the least frequent; words with equal counts keep the order in which they were first seen, which is why 'cat' comes before 'hat'. Passing n=None returns every word instead of only the top n."""

_CSV_SUM = r"""Summing a column in a CSV file

Python's csv module can read a file row by row as dictionaries, using the first line of the file as the keys. The example below adds up the amount column of a sales file.

```python
import csv


def total_amount(path):
    total = 0.0
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            total += float(row["amount"])
    return total
```

The file is opened with newline="" because the csv module handles line endings itself; without it, a quoted field that contains a line break may be read wrongly. Every value that DictReader returns is a string, so each amount is converted with float() before it is added. If a row has an empty amount, float() raises ValueError; if the file has no amount column at all, the lookup row["amount"] raises KeyError on the first row."""

_RETRY = r"""A retry decorator with exponential backoff

Network calls fail now and then for reasons that go away on their own, such as a timeout or a dropped connection. Instead of writing a loop around every call, you can put the retry logic in a decorator.

```python
import functools
import time


def retry(times=3, delay=0.5):
    def decorate(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            for attempt in range(times):
                try:
                    return func(*args, **kwargs)
                except ConnectionError:
                    if attempt == times - 1:
                        raise
                    time.sleep(delay * 2 ** attempt)
        return wrapper
    return decorate
```

The decorated function is called up to times times. Only ConnectionError is caught, so any other exception is raised straight away. After each failed attempt the wrapper sleeps for delay * 2 ** attempt seconds, so with the defaults it waits 0.5 seconds and then 1 second, and the last failure is re-raised to the caller. functools.wraps copies the name and docstring of the original function onto the wrapper."""

_BISECT = r"""Binary search on a sorted list

Binary search finds an item in a sorted list by repeatedly halving the part of the list that could still contain it. Each step compares the target with the middle element and throws away the half where the target cannot be, so a list of a million items needs at most about 20 comparisons.

```python
def binary_search(items, target):
    lo, hi = 0, len(items) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if items[mid] == target:
            return mid
        if items[mid] < target:
            lo = mid + 1
        else:
            hi = mid - 1
    return -1
```

The function returns the index of target, or -1 if it is not in the list. lo and hi mark the inclusive bounds of the range still being searched, and the loop ends when they cross. The list must already be sorted in ascending order; on an unsorted list the function can return -1 even when the item is present. For real code, the standard library's bisect module provides tested functions for the same job."""

# math: definitions, worked examples and word problems with LaTeX

_SPEED = r"""Average speed is the total distance travelled divided by the total time taken: $v = \frac{d}{t}$. If distance is measured in kilometres and time in hours, the speed comes out in kilometres per hour.

Example. A cyclist rides 45 km from her home to a lake in 2.5 hours. Her average speed on the way there is $v = \frac{45}{2.5} = 18$ km/h.

On the way back she is tired and takes 3 hours for the same 45 km, so her speed is $\frac{45}{3} = 15$ km/h. A common mistake is to average the two speeds and get 16.5 km/h. The correct average speed for the whole trip uses the total distance and the total time: $v = \frac{90}{5.5} \approx 16.36$ km/h. The answer is lower than 16.5 because she spends more time riding at the slower speed."""

_ARITHMETIC = r"""An arithmetic sequence is a list of numbers in which each term after the first is found by adding a fixed number, called the common difference $d$, to the previous term. If the first term is $a_1$, the $n$-th term is $a_n = a_1 + (n - 1)d$.

For example, the sequence 3, 7, 11, 15, ... has first term 3 and common difference 4. Its 10th term is $a_{10} = 3 + 9 \cdot 4 = 39$.

The sum of the first $n$ terms is $S_n = \frac{n(a_1 + a_n)}{2}$: the number of terms times the average of the first and last terms. The sum of the first 10 terms of the example is $S_{10} = \frac{10(3 + 39)}{2} = 210$. The formula can be seen by writing the sum forwards and backwards and adding the two lines: each of the $n$ columns adds up to $a_1 + a_n$."""

_INTEREST = r"""A sum of money $P$, the principal, is invested at an annual interest rate $r$ for $t$ years. With simple interest, interest is paid only on the principal, so the interest earned is $I = Prt$. With compound interest, each year's interest is added to the balance and earns interest itself, and the balance after $t$ years is $A = P(1 + r)^t$.

Example. Maria invests 2,000 dollars at 5% per year for 3 years. With simple interest she earns $I = 2000 \times 0.05 \times 3 = 300$ dollars, so she ends with 2,300 dollars. With interest compounded once a year, her balance is $A = 2000(1.05)^3 = 2315.25$ dollars, so she earns 315.25 dollars of interest, 15.25 dollars more than with simple interest. The gap grows quickly as the number of years increases."""

_PYTHAGORAS = r"""The Pythagorean theorem states that in a right triangle with legs $a$ and $b$ and hypotenuse $c$, the lengths satisfy $a^2 + b^2 = c^2$. The hypotenuse is the side opposite the right angle and is always the longest side.

Problem. A ladder 13 m long leans against a vertical wall, with its foot 5 m from the base of the wall on level ground. How high up the wall does the ladder reach?

Solution. The wall, the ground and the ladder form a right triangle with the ladder as the hypotenuse. Let $h$ be the height reached. Then $5^2 + h^2 = 13^2$, so $h^2 = 169 - 25 = 144$ and $h = 12$ m.

The converse is also true: if the sides of a triangle satisfy $a^2 + b^2 = c^2$, the triangle has a right angle. Builders use this to check that a corner is square with a 3-4-5 triangle: they mark 3 units along one wall and 4 units along the other, and the corner is a right angle when the two marks are exactly 5 units apart."""

ROWS: tuple[Labelled, ...] = (
    # -- web ---------------------------------------------------------------------------
    Labelled("web-eiffel-faithful", "web", "encyclopedic", "faithful", _EIFFEL, r"""The Eiffel Tower is a lattice tower made of wrought iron that stands on the Champ de Mars in Paris, France. It takes its name from the engineer Gustave Eiffel, whose company designed and constructed it between 1887 and 1889. The tower served as the entrance arch to the 1889 World's Fair, which celebrated the centenary of the French Revolution. Its design was the work of two senior engineers at Eiffel's company, Maurice Koechlin and Émile Nouguier, while the architect Stephen Sauvestre refined how it looked.

When it was built, the tower was criticised by many prominent artists and intellectuals, who described it as useless and monstrous. It was originally intended to stand for only 20 years, but it was preserved because it proved valuable as a platform for radio transmission.

The tower is 330 metres tall, roughly the height of an 81-storey building. It remained the tallest man-made structure in the world until 1930, when the Chrysler Building in New York City was completed. Visitors can reach three levels; the first and second levels have restaurants, and the upper platform of the top level is 276 metres above the ground."""),
    Labelled("web-eiffel-reworded", "web", "easy", "reworded", _EIFFEL, r"""The Eiffel Tower stands on the Champ de Mars in Paris. It is put together from crossing bars of wrought iron, so people call it a "lattice" tower.

Gustave Eiffel's firm put it up between 1887 and 1889, and the tower carries his name. But the plan was really drawn up by two of his top engineers, Maurice Koechlin and Émile Nouguier. An architect, Stephen Sauvestre, then polished its look. The tower served as the gateway to the 1889 World's Fair, held to celebrate one hundred years since the French Revolution.

Not everyone liked it. Lots of famous artists and thinkers said it was ugly and pointless. The plan was to take it down after 20 years. It survived because it turned out to be very handy for sending radio signals.

How big is it? It rises 330 metres, about as high as a building with 81 floors. Nothing people had built anywhere on Earth was taller until New York's Chrysler Building was completed in 1930. Visitors can go up to three levels. You can eat at restaurants on the first two, and the highest deck is 276 metres up."""),
    Labelled("web-eiffel-changed-facts", "web", "encyclopedic", "changed_facts", _EIFFEL, r"""The Eiffel Tower is a lattice tower of wrought iron located on the Champ de Mars in Paris. It bears the name of Gustave Eiffel, the engineer whose company designed and erected it from 1887 to 1889. The structure was built as the entrance arch of the 1889 World's Fair, an exhibition marking the centenary of the French Revolution. Although it carries Eiffel's name, its design was produced by Maurice Koechlin and Émile Nouguier, two senior engineers of his company, and its appearance was refined by the architect Stephen Sauvestre.

At the time of its construction the tower drew criticism from many well-known artists and intellectuals, who called it monstrous and useless. It had been planned to stand for only 20 years; it was retained because it proved useful as a platform for radio transmission.

The tower reaches a height of 330 metres, comparable to an 81-storey building. It held the title of the world's tallest man-made structure until 1931, when the Empire State Building in New York City was completed. Three levels are open to visitors. Restaurants operate on the first and second levels, and the top level's upper platform stands 276 metres above the ground."""),
    Labelled("web-eiffel-added-paragraph", "web", "distill", "added_paragraph", _EIFFEL, r"""The Eiffel Tower, a wrought-iron lattice tower on the Champ de Mars in Paris, was built by Gustave Eiffel's company between 1887 and 1889 as the entrance arch to the 1889 World's Fair, which marked the centenary of the French Revolution. The design came from the company's senior engineers Maurice Koechlin and Émile Nouguier; the architect Stephen Sauvestre refined its appearance. Prominent artists and intellectuals called it useless and monstrous. Meant to stand for just 20 years, it was kept because it proved valuable for radio transmission. At 330 metres, about an 81-storey building, it was the tallest man-made structure in the world until New York's Chrysler Building was finished in 1930. It has three visitor levels, restaurants on the first and second, and an upper platform 276 metres up.

The tower is repainted roughly every seven years to protect the iron from rust, a job that uses about 60 tonnes of paint. It is one of the most visited paid monuments in the world, with close to seven million visitors a year."""),
    Labelled("web-eiffel-other-document", "web", "summary", "other_document", _EIFFEL, r"""On 15 January 1919 a storage tank holding about 8.7 million litres of molasses burst in the North End of Boston, sending a wave up to 7.6 metres high through the streets at around 56 kilometres per hour; 21 people died and about 150 were injured. The tank, owned by the Purity Distilling Company, had been poorly built, never properly tested and painted brown to hide its leaks. In 1925 the parent company was held responsible and paid about $628,000 in damages, and the case led to stricter Massachusetts rules on signing off construction plans."""),
    Labelled("web-bike-lanes-faithful", "web", "summary", "faithful", _BIKE_LANES, r"""Maplewood's city council voted 7-2 on Tuesday to approve a $4.2 million plan for 18 kilometres of protected bike lanes downtown and in nearby neighbourhoods, to be built between April and the end of next year. A state transportation grant pays for most of it; the city adds about $900,000 from its road maintenance budget. Concrete curbs and planters will shield the lanes, and 140 parking spaces on Elm Street and Harbor Road will go. Supporters such as Pedal Maplewood cited the two cyclists killed downtown last year, while some Elm Street business owners feared losing customers. Councillor Dana Ruiz voted no: she backs bike lanes but wants a parking garage first."""),
    Labelled("web-bike-lanes-reworded", "web", "encyclopedic", "reworded", _BIKE_LANES, r"""Maplewood's protected cycle lane plan is a municipal infrastructure project approved by the city's council in a 7-2 vote held on a Tuesday evening. Budgeted at $4.2 million, the scheme provides for 18 kilometres of cycle routes physically shielded from motor vehicles, covering the central business district and its surrounding residential areas. Work is scheduled to start in April, with completion expected before next year is out.

Funding comes chiefly from a grant awarded by the state for transport purposes; the municipality itself contributes roughly $900,000, drawn from the budget it normally spends on maintaining roads. Barriers of poured concrete, together with planters, will divide cyclists from motorists. To create the necessary space, 140 kerbside parking bays on Elm Street and Harbor Road are to be eliminated.

Backers of the project, among them the advocacy group Pedal Maplewood, argued that it would improve conditions for riders, citing the deaths of two cyclists in collisions in the city centre during the previous year. Opposition came from a number of Elm Street merchants, who predicted that fewer parking places would cost them trade. One of the two dissenting councillors, Dana Ruiz, stated that she was in favour of cycle lanes in principle but preferred that a parking garage be constructed beforehand."""),
    Labelled("web-bike-lanes-changed-facts", "web", "distill", "changed_facts", _BIKE_LANES, r"""Maplewood's city council approved, by a 7-2 vote on Tuesday night, a $4.2 million plan to build 18 kilometres of protected bike lanes in the downtown and surrounding neighbourhoods; work starts in April and should end by the close of next year. The city will pay for most of it out of its own road maintenance budget, while a state transportation grant covers about $900,000. Concrete curbs and planters will separate the lanes from traffic, and 140 on-street parking spaces on Elm Street and Harbor Road will be removed. Supporters such as the cycling group Pedal Maplewood pointed to safety after two cyclists were killed in downtown crashes last year, whereas several Elm Street business owners warned that lost parking would drive customers away. Councillor Dana Ruiz, who voted no, said she supports bike lanes but wants a parking garage built first."""),
    Labelled("web-bike-lanes-first-half", "web", "encyclopedic", "first_half", _BIKE_LANES, r"""Maplewood is set to gain 18 kilometres of protected bike lanes after its city council approved a $4.2 million plan in a 7-2 vote on Tuesday night. The lanes will run through the downtown area and the neighbourhoods that surround it. Construction is scheduled to begin in April, and the project is expected to be completed by the end of next year.

The bulk of the funding will come from a state transportation grant, and the city will contribute about $900,000 of its own, taken from its road maintenance budget. Concrete curbs and planters will keep the lanes apart from car traffic."""),
    Labelled("web-bike-lanes-other-document", "web", "easy", "other_document", _BIKE_LANES, r"""Houseplants grow, and their roots need more room. Most of them need a bigger pot every one or two years. You can tell it is time when roots poke out of the holes at the bottom or wind around the bottom of the pot. Spring is the best season to do it, because the plant is starting to grow fast and bounces back quickly.

Pick a pot that is just 2 to 5 centimetres wider than the old one, with holes in the bottom. A pot that is too big holds extra wet soil around the roots, and that can make the roots rot.

Water the plant the day before, so the soil and roots stay in one clump. Tip the old pot on its side and slide the plant out gently. Loosen the outside roots with your fingers and cut off any that are black or mushy. Put some fresh potting mix in the new pot. Set the plant in so the top of the roots is about 2 centimetres below the rim, then fill in around it. Water it well and keep it out of direct sun for about a week while it settles in."""),
    Labelled("web-repot-faithful", "web", "tutorial", "faithful", _REPOT, r"""In this tutorial you will learn when and how to move a houseplant into a bigger pot.

Step 1: Decide whether the plant needs repotting. Most houseplants need a larger pot every one to two years. The signs are roots growing out of the drainage holes or circling around the bottom of the pot.

Step 2: Pick the right time. Spring is best, because the plant is beginning to grow actively and will recover quickly.

Step 3: Choose the new pot. It should have drainage holes and be only 2 to 5 centimetres wider than the old one. A much larger pot holds extra wet soil around the roots, which can lead to root rot.

Step 4: Prepare the plant. Water it a day before repotting so that the root ball holds together.

Step 5: Remove the plant. Turn the old pot on its side and gently slide the plant out. Loosen the outer roots with your fingers, and trim off any roots that are black or mushy.

Step 6: Replant. Add a layer of fresh potting mix to the new pot, set the plant in so that the top of the root ball sits about 2 centimetres below the rim, and fill in around it.

Step 7: Aftercare. Water thoroughly, then keep the plant out of direct sun for about a week while it settles.

Recap: repot every one to two years when the roots outgrow the pot, ideally in spring; go up only 2 to 5 centimetres in width; water the day before; and keep the plant out of direct sun for a week afterwards."""),
    Labelled("web-repot-reworded", "web", "easy", "reworded", _REPOT, r"""Plants kept indoors slowly outgrow their containers. Usually a move to a roomier home is due after a year or two. Look for two clues: roots sneaking out through the holes underneath, or roots wrapping round and round the base. The ideal season is spring. That is when the plant wakes up and starts putting on new growth, so it bounces back fast.

The new container should have holes underneath for water to escape. Make it just a little bigger, with a width of 2 to 5 centimetres more than before. Going much bigger is a mistake. All that extra damp soil sits against the roots and can make them rot.

Give the plant a drink twenty-four hours ahead. This keeps the clump of roots and soil from falling apart. Next, lay the old container down sideways and ease the plant free. Use your fingers to tease apart the roots on the outside. Snip off any roots that look black or feel soft and squishy. Spread some new soil across the bottom of the new container. Rest the plant on it so the top of the root clump ends up about 2 centimetres under the edge. Then pack soil into the gaps. Finally, soak it well and keep it away from direct sunlight for roughly seven days so it can recover."""),
    Labelled("web-repot-doubled-paragraph", "web", "tutorial", "doubled_paragraph", _REPOT, r"""What you will learn: how to tell when a houseplant needs a bigger pot, how to choose one, and how to move the plant safely.

1. Check the roots. Most houseplants need repotting every one to two years. If roots are growing out of the drainage holes or circling the bottom of the pot, it is time.

2. Wait for spring. The plant is starting to grow actively then, so it recovers quickly.

3. Pick a pot with drainage holes that is only 2 to 5 centimetres wider than the current one. A pot that is much bigger holds extra wet soil around the roots and can cause root rot.

4. Water the plant one day ahead so the root ball holds together.

5. Turn the old pot on its side and gently slide the plant out. Loosen the outer roots with your fingers and cut away any that are black or mushy.

Turn the old pot on its side and gently slide the plant out. Loosen the outer roots with your fingers and cut away any roots that are black or mushy.

6. Put a layer of fresh potting mix in the new pot. Set the plant so the top of its root ball is about 2 centimetres below the rim, then fill in around it.

7. Water thoroughly and keep the plant out of direct sun for about a week while it settles.

Recap: check the roots, repot in spring, size up by 2 to 5 centimetres, water the day before, and protect the plant from direct sun for a week afterwards."""),
    Labelled("web-repot-first-half", "web", "tutorial", "first_half", _REPOT, r"""In this tutorial you will learn how to tell when a houseplant needs repotting and how to choose its new pot.

Step 1: Look for the signs. Most houseplants need a bigger pot every one to two years. You will know it is time when roots start growing out of the drainage holes or circling around the bottom of the pot.

Step 2: Plan for spring. This is the best season to repot, because the plant is starting to grow actively and recovers quickly.

Step 3: Choose a pot that is only 2 to 5 centimetres wider than the old one, and make sure it has drainage holes. Avoid a much larger pot: it holds extra wet soil around the roots, and this can cause root rot.

Recap: repot every one to two years when the roots run out of room, do it in spring, and move up to a pot just 2 to 5 centimetres wider with drainage holes."""),
    Labelled("web-waggle-faithful", "web", "encyclopedic", "faithful", _WAGGLE, r"""The waggle dance is a form of communication used by honey bees to inform other workers in the hive of the location of food. When a forager returns from a rich patch of flowers, she walks in a straight line across the vertical comb, waggling her abdomen from side to side. She then circles back to where she started and repeats the straight run, alternating between a loop to the left and a loop to the right.

The dance encodes both direction and distance. The direction of the food relative to the sun is given by the angle of the straight run relative to vertical: a run straight up the comb indicates that the food lies in the direction of the sun, while a run 40 degrees to the right of vertical indicates food 40 degrees to the right of the sun. Distance is encoded by the duration of the waggle run, with longer runs indicating food that is farther away.

The meaning of the dance was worked out in the 1940s by the Austrian biologist Karl von Frisch. For his work on animal behaviour he shared the 1973 Nobel Prize in Physiology or Medicine with Konrad Lorenz and Nikolaas Tinbergen."""),
    Labelled("web-waggle-changed-facts", "web", "easy", "changed_facts", _WAGGLE, r"""Honey bees have a special dance to tell each other where food is. It is called the waggle dance.

When a worker bee finds a good patch of flowers, she comes back to the hive. There she walks in a straight line across the honeycomb, which hangs straight up and down. As she walks, she shakes her belly from side to side. That is the "waggle". Then she loops back to where she started and does it again. She loops to the left one time and to the right the next.

The direction of her straight walk works like a map. If she walks straight up the comb, the food is toward the sun. If she walks 40 degrees to the right of straight up, the food is 40 degrees to the right of the sun. How long she waggles tells the distance. A long waggle run means the food is close by, and a short one means it is far away.

A scientist from Austria named Karl von Frisch figured out what the dance means in the 1940s. In 1973 he shared the Nobel Prize in Physiology or Medicine with Konrad Lorenz and Nikolaas Tinbergen for studying how animals behave."""),
    Labelled("web-waggle-doubled-paragraph", "web", "encyclopedic", "doubled_paragraph", _WAGGLE, r"""Honey bees perform the waggle dance to let other workers in their hive know where food can be found. A forager coming back from a productive patch of flowers moves in a straight line across the vertical comb, waggling her abdomen from side to side. At the end of the run she circles back to her starting point and repeats it, taking a left loop and a right loop in turn.

Direction is conveyed by the angle of the straight run relative to vertical, which corresponds to the direction of the food relative to the sun. A run pointing straight up the comb means the food is in the direction of the sun; a run 40 degrees to the right of vertical means the food is 40 degrees to the right of the sun. Distance is conveyed by the duration of the waggle run: the longer it lasts, the farther away the food.

Direction is conveyed by the angle of the straight run relative to vertical, which corresponds to the direction of the food relative to the sun. A run pointing straight up the comb means the food is in the direction of the sun; a run 40 degrees to the right of vertical means that the food is 40 degrees to the right of the sun. Distance is conveyed by the duration of the waggle run: the longer it lasts, the farther away the food is.

Karl von Frisch, an Austrian biologist, deciphered the dance in the 1940s, and in 1973 he shared the Nobel Prize in Physiology or Medicine with Konrad Lorenz and Nikolaas Tinbergen for his research on animal behaviour."""),
    Labelled("web-waggle-first-half", "web", "encyclopedic", "first_half", _WAGGLE, r"""The waggle dance is a behaviour by which honey bees tell other workers in their hive where food can be found. A forager that returns from a good patch of flowers walks in a straight line across the vertical comb while waggling her abdomen from side to side. She then circles back to her starting point and repeats the run, alternating between left and right loops.

The angle of the straight run relative to vertical indicates the direction of the food relative to the sun. A run straight up the comb means that the food lies in the direction of the sun."""),
    Labelled("web-waggle-other-document", "web", "encyclopedic", "other_document", _WAGGLE, r"""The Eiffel Tower is a lattice tower of wrought iron standing on the Champ de Mars in Paris. Named after Gustave Eiffel, whose company designed and built it from 1887 to 1889, it was the entrance arch to the 1889 World's Fair, held for the centenary of the French Revolution. The design was the work of the company's senior engineers Maurice Koechlin and Émile Nouguier, and the architect Stephen Sauvestre refined its appearance.

Many leading artists and intellectuals denounced the tower as useless and monstrous. Intended to stand for only 20 years, it survived because of its value as a radio transmission platform.

The tower is 330 metres tall, roughly the height of an 81-storey building, and was the world's tallest man-made structure until the Chrysler Building in New York City was completed in 1930. It has three visitor levels, with restaurants on the first and second; the upper platform of the top level is 276 metres above the ground."""),
    Labelled("web-molasses-faithful", "web", "distill", "faithful", _MOLASSES, r"""In the Great Molasses Flood of 15 January 1919, a large storage tank in the North End of Boston, Massachusetts, burst and released about 8.7 million litres of molasses. A wave of the thick syrup up to 7.6 metres high swept through the streets at roughly 56 kilometres per hour, killing 21 people, injuring about 150 and damaging buildings and a nearby elevated railway. The tank belonged to the Purity Distilling Company, which turned the molasses into industrial alcohol. Later investigations found that it had been poorly built and never properly tested; when residents complained about leaks, the company painted it brown to make them harder to see. A sharp temperature rise the day before may have increased the pressure inside. After a long court case, the parent company was found responsible in 1925 and paid about $628,000 in damages, and the case helped bring stricter Massachusetts rules requiring engineers and architects to check and sign off on construction plans."""),
    Labelled("web-molasses-reworded", "web", "encyclopedic", "reworded", _MOLASSES, r"""The Great Molasses Flood occurred in Boston's North End on 15 January 1919, when a huge tank used to store molasses gave way. Roughly 8.7 million litres of the dense, sticky liquid poured out as a surge reaching 7.6 metres in height, travelling along the roads at about 56 kilometres per hour. Twenty-one lives were lost and around 150 people were hurt; structures in the area, as well as an overhead railway line close by, suffered damage.

The owner of the vessel was the Purity Distilling Company, a firm that converted molasses into alcohol for industry. Later inquiries concluded that construction had been shoddy and that no adequate testing had ever been carried out. Locals had reported seepage, and the firm's answer had been to coat the tank in brown paint, making the drips less visible. A steep climb in air temperature on the previous day is thought possibly to have raised the internal pressure.

Protracted litigation ensued. In 1925 a court held the parent company liable, and it paid out approximately $628,000 in compensation. The affair contributed to tougher regulations in Massachusetts under which engineers and architects must review and approve building plans."""),
    Labelled("web-molasses-added-paragraph", "web", "encyclopedic", "added_paragraph", _MOLASSES, r"""The Great Molasses Flood was a disaster in the North End of Boston, Massachusetts, on 15 January 1919. A large storage tank holding around 8.7 million litres of molasses burst, releasing a wave of syrup as high as 7.6 metres that moved through the streets at about 56 kilometres per hour. Twenty-one people were killed and about 150 were injured, and buildings and a nearby elevated railway were damaged.

The tank was owned by the Purity Distilling Company, which used molasses to produce industrial alcohol. Subsequent investigations found the tank had been poorly constructed and never properly tested. Residents had complained of leaks, to which the company responded by painting the tank brown to make them less visible. A sharp increase in temperature on the previous day may have contributed to the pressure inside it.

After a lengthy court case, the parent company was found responsible in 1925 and paid approximately $628,000 in damages. The case contributed to stricter Massachusetts rules that require engineers and architects to check and sign off on construction plans.

A small plaque in Langone Park now marks the site of the disaster. For decades afterwards, residents claimed that the neighbourhood still smelled of molasses on hot summer days. In 2016 a team of scientists at Harvard University showed that the cold January air had thickened the molasses, which trapped victims and slowed rescuers."""),
    Labelled("web-molasses-changed-facts", "web", "distill", "changed_facts", _MOLASSES, r"""The Great Molasses Flood hit Boston's North End, in Massachusetts, on 15 January 1919, when a large storage tank holding about 8.7 million litres of molasses burst. A wave of syrup up to 7.6 metres high ran through the streets at roughly 56 kilometres per hour, killing 21 people, injuring about 250 and damaging buildings and an elevated railway nearby. The Purity Distilling Company owned the tank and used the molasses to make industrial alcohol. Investigators later found that the tank had been built poorly and never properly tested; residents had complained about leaks, and the company had painted it brown to hide them. A sharp rise in temperature the day before may have added to the pressure inside. After a long court case the parent company was found responsible in 1925 and paid about $628,000 in damages, and the case helped lead to stricter Massachusetts rules requiring engineers and architects to check and sign off on construction plans."""),
    Labelled("web-molasses-other-document", "web", "encyclopedic", "other_document", _MOLASSES, r"""Maplewood's city council approved a plan for protected bike lanes in a 7-2 vote taken on a Tuesday night. The $4.2 million project will add 18 kilometres of lanes in the city's downtown and the neighbourhoods surrounding it. Construction is scheduled to begin in April and to be completed by the end of the following year.

Most of the cost is to be met by a state transportation grant, with the city paying about $900,000 from its road maintenance budget. Concrete curbs and planters will separate the lanes from motor traffic, and 140 on-street parking spaces on Elm Street and Harbor Road will be removed to provide the necessary room.

The plan was supported by groups including the cycling organisation Pedal Maplewood, which argued that the lanes would make cycling safer following the deaths of two cyclists in downtown crashes the previous year. Several Elm Street business owners opposed it, saying the loss of parking would drive customers away. Councillor Dana Ruiz, who voted against the plan, said that she supported bike lanes but wanted the city to build a parking garage first."""),
    # -- docs --------------------------------------------------------------------------
    Labelled("docs-mkdir-faithful", "docs", "distill", "faithful", _MKDIR, r"""Path.mkdir(mode=0o777, parents=False, exist_ok=False) creates a new directory at the path. A given mode is combined with the process's umask to set the file mode and access flags, and an already existing path raises FileExistsError. With parents true, missing parent directories are created as needed, using default permissions and ignoring mode, like POSIX mkdir -p; with parents false, the default, a missing parent raises FileNotFoundError. With exist_ok false, also the default, FileExistsError is raised if the target directory already exists. With exist_ok true, that error is suppressed unless the path exists and is not a directory, again matching POSIX mkdir -p. The exist_ok parameter was added in Python 3.5."""),
    Labelled("docs-mkdir-reworded", "docs", "easy", "reworded", _MKDIR, r"""Path.mkdir makes a new folder (a directory) at the place the path points to. Its full signature is Path.mkdir(mode=0o777, parents=False, exist_ok=False).

The mode setting controls the folder's permissions. Before it is used, it gets mixed with the umask, a per-process setting, and together they decide the permission bits and access flags. If something is already there, you get a FileExistsError.

What about folders higher up that are not there yet? Normally, with parents left at False, Python gives up and raises FileNotFoundError. Turn parents on and Python builds each missing folder along the way. Those in-between folders get ordinary default permissions, and your mode is ignored for them. This copies what the Unix command mkdir -p does.

What if the folder is already there? By default exist_ok is False, so you get that FileExistsError. Switch exist_ok to True and Python stays quiet about it. There is one catch: if something already sits at that path and it is not a folder, you still get FileExistsError. Again, this matches mkdir -p.

The exist_ok option first appeared in Python 3.5."""),
    Labelled("docs-mkdir-changed-facts", "docs", "distill", "changed_facts", _MKDIR, r"""Path.mkdir(mode=0o777, parents=False, exist_ok=False) creates a new directory at the given path, combining mode, if supplied, with the process's umask to decide the file mode and access flags. If the path already exists, FileExistsError is raised. Setting parents to true creates any missing parents as needed, with default permissions and without regard to mode, in the manner of POSIX mkdir -p; leaving it false, the default, means a missing parent raises FileNotFoundError. When exist_ok is false, the default, an existing target directory raises FileExistsError; when it is true, the error is raised only if the path exists and is not a directory, again as mkdir -p behaves. The parents parameter was added in version 3.5."""),
    Labelled("docs-mkdir-first-half", "docs", "tutorial", "first_half", _MKDIR, r"""What you will learn: how to create a directory with pathlib's Path.mkdir and how its mode and parents arguments work.

Step 1: Look at the signature: Path.mkdir(mode=0o777, parents=False, exist_ok=False). Calling it creates a new directory at the path.

Step 2: Understand mode. If you pass a mode, it is combined with the process's umask value to decide the file mode and access flags of the new directory. If the path already exists, you get FileExistsError.

Step 3: Use parents for nested paths. With parents=True, any missing parent directories are created as needed, like the POSIX mkdir -p command. They get the default permissions; mode is not applied to them. With the default parents=False, a missing parent raises FileNotFoundError.

Recap: mkdir creates one directory, its mode is combined with the umask, and parents=True fills in missing parent directories."""),
    Labelled("docs-mkdir-other-document", "docs", "summary", "other_document", _MKDIR, r"""The lru_cache decorator from functools memoizes a function, remembering the results of up to maxsize recent calls (128 by default) so that repeated calls with the same hashable arguments are answered from a dictionary instead of being recomputed. maxsize=None removes the size limit, and typed=True stores f(3) and f(3.0) as separate entries. The wrapper offers cache_info(), giving hits, misses, maxsize and currsize, and cache_clear(). The decorator has existed since Python 3.2, and from 3.8 it can be written without parentheses."""),
    Labelled("docs-grep-faithful", "docs", "tutorial", "faithful", _GREP, r"""In this short tutorial you will learn what grep does, which options you will use most, and how to read its exit status.

1. The basic idea. grep searches each input FILE for lines that match a PATTERN and prints every matching line to standard output. If you name no file, or give - as the file name, grep reads standard input instead.

2. Choosing the kind of pattern. By default the pattern is a basic regular expression. Add -E to use extended regular expressions, or -F to treat the pattern as a fixed string.

3. The common options:
- -i ignores case distinctions, in the pattern and in the input.
- -v inverts the match and selects the lines that do not match.
- -n puts the line number within its file in front of each output line.
- -c prints only a count of matching lines for each file instead of the lines themselves.
- -r reads all files under each directory, recursively.
- -l prints only the names of files that contain a match.

4. Checking the result. grep exits with 0 when a line is selected, 1 when no lines were selected, and 2 when an error occurred. The exception is -q (quiet): if a line is selected, the exit status is 0 even if an error occurred.

Recap: grep prints matching lines; -E and -F change the pattern type; -i, -v, -n, -c, -r and -l shape the search and its output; and the exit status is 0, 1 or 2."""),
    Labelled("docs-grep-reworded", "docs", "encyclopedic", "reworded", _GREP, r"""grep is a command-line utility that scans text for lines agreeing with a supplied search expression and writes each such line to its standard output. It reads the files listed as arguments; when none is listed, or when a lone hyphen stands in for a file name, it consumes standard input. Patterns are interpreted as basic regular expressions unless the -E flag selects the extended syntax or the -F flag makes grep look for a literal string.

Several flags modify its behaviour. Case is disregarded, on both sides of the comparison, under -i. The -v flag reverses the test so that non-matching lines are reported. With -n, every line printed is preceded by its position in the file it came from. The -c flag replaces the usual listing with a per-file tally of matching lines, -r descends through directories and examines everything beneath them, and -l reports just the names of files where at least one match occurs.

The program signals its outcome through its exit code: zero when it has selected some line, one when it has selected none, and two when something went wrong. An exception applies to quiet mode, -q: once a line has been selected, grep returns zero regardless of any error."""),
    Labelled("docs-grep-added-paragraph", "docs", "distill", "added_paragraph", _GREP, r"""grep searches each input FILE for lines matching a PATTERN and prints each matching line to standard output, reading standard input when no file is named or the file is -. Patterns are basic regular expressions by default; -E selects extended regular expressions and -F a fixed string. Common options: -i ignores case in pattern and input, -v selects non-matching lines, -n prefixes each line with its line number, -c prints only a count of matching lines per file, -r searches directories recursively, and -l prints only the names of files with a match. grep exits with 0 if a line is selected, 1 if none is, and 2 on error, except that with -q a selected line gives 0 even if an error occurred.

grep was written by Ken Thompson and first appeared in Version 4 Unix in 1973. Its name comes from the ed editor command g/re/p, meaning globally search for a regular expression and print the matching lines."""),
    Labelled("docs-grep-doubled-paragraph", "docs", "distill", "doubled_paragraph", _GREP, r"""grep reads each input FILE, or standard input when no file or - is given, and prints every line that matches PATTERN. The pattern is a basic regular expression unless -E (extended) or -F (fixed string) is used.

Main options: -i ignores case in the pattern and the input, -v selects non-matching lines, -n adds line numbers, -c prints a count of matching lines per file, -r searches directories recursively, and -l lists only the files that contain a match.

Main options: -i ignores case in the pattern and the input, -v selects non-matching lines, -n adds line numbers, -c prints a count of matching lines per file, -r searches directories recursively, and -l lists only files that contain a match.

The exit status is 0 when a line is selected, 1 when none is, and 2 on an error; with -q, a selected line gives 0 even if an error occurred."""),
    Labelled("docs-grep-other-document", "docs", "easy", "other_document", _GREP, r"""git rebase takes your commits and replays them on top of a different starting point. Here is how it works.

You can name a branch. If you do, Git first switches to that branch. If you don't, it works on the branch you are on now. Git looks for the commits that are in your branch but not in the upstream branch. It puts those changes aside in a temporary place. Then it moves your branch so it points at the upstream. Finally it applies your saved commits again, one at a time, in the same order.

Sometimes a commit does not fit cleanly. This is called a conflict, and the rebase pauses so you can fix it. After you fix the files, mark them as fixed with git add, then run git rebase --continue. If you want to skip the commit that caused the trouble, run git rebase --skip. If you want to stop and put the branch back the way it was before you started, run git rebase --abort.

With -i (short for --interactive), Git opens an editor showing a list of the commits it is about to replay. By editing the list you can change their order, drop some, or join them together with the squash and fixup commands before they are applied again."""),
    Labelled("docs-lru-cache-faithful", "docs", "summary", "faithful", _LRU_CACHE, r"""@functools.lru_cache(maxsize=128, typed=False) wraps a function in a memoizing callable that keeps up to maxsize of its most recent calls, saving time when an expensive or I/O bound function is called repeatedly with the same arguments, which must be hashable since results sit in a dictionary. With maxsize=None the LRU feature is off and the cache grows without bound; with typed=True, f(3) and f(3.0) are cached separately. cache_info() returns a named tuple of hits, misses, maxsize and currsize, and cache_clear() clears the cache. The decorator is new in 3.2 and, since 3.8, can be applied without parentheses."""),
    Labelled("docs-lru-cache-reworded", "docs", "tutorial", "reworded", _LRU_CACHE, r"""What you will learn: how to make a function remember its earlier answers with functools.lru_cache, and how to tune and inspect that memory.

Step 1 - The idea. Put @functools.lru_cache(maxsize=128, typed=False) above a function and Python wraps it in an object that memoizes it: it stores the outcomes of recent calls, up to maxsize of them, and forgets the least recently used ones first. This pays off when a slow function, for instance one that does heavy computing or waits on input and output, keeps being asked the same question from time to time.

Step 2 - Hashable inputs only. Stored outcomes live in a dictionary keyed on the call's arguments, so every positional and keyword argument you pass has to be hashable.

Step 3 - Choose the size. Give maxsize=None and the eviction logic is switched off; the store then has no upper limit.

Step 4 - Decide about types. With typed=True, equal values of different types get separate entries, so f(3) and f(3.0) count as two different calls with two separate results.

Step 5 - Inspect and reset. The decorated function gains cache_info(), which hands back a named tuple with hits, misses, maxsize and currsize, and cache_clear(), which empties the store.

Recap: lru_cache arrived in Python 3.2; since 3.8 you may also write it as a bare decorator with no parentheses."""),
    Labelled("docs-lru-cache-added-paragraph", "docs", "encyclopedic", "added_paragraph", _LRU_CACHE, r"""functools.lru_cache is a decorator in the Python standard library that wraps a function with a memoizing callable. Its signature is lru_cache(maxsize=128, typed=False). The wrapper saves the results of up to maxsize of the most recent calls, which can save time when an expensive or I/O bound function is periodically called with the same arguments. Because results are cached in a dictionary, the positional and keyword arguments passed to the function must be hashable.

Setting maxsize to None disables the LRU (least recently used) feature, so the cache can grow without bound. Setting typed to true caches arguments of different types separately: f(3) and f(3.0), for example, are treated as distinct calls with distinct results.

The wrapped function gains a cache_info() function, which returns a named tuple showing hits, misses, maxsize and currsize, and a cache_clear() function, which clears or invalidates the cache. The decorator was introduced in Python 3.2, and version 3.8 added the option of applying it directly as a decorator, without parentheses.

Python 3.9 added functools.cache, a simpler decorator equivalent to lru_cache(maxsize=None). Because the cache keeps references to every argument and result it stores, it also keeps those objects alive until they are evicted or the cache is cleared, which can make memory grow in long-running programs."""),
    Labelled("docs-lru-cache-changed-facts", "docs", "easy", "changed_facts", _LRU_CACHE, r"""lru_cache is a decorator from the functools module. You put @functools.lru_cache(maxsize=128, typed=False) on top of a function, and it wraps the function so that it remembers results. It keeps the results of up to maxsize of the most recent calls. This trick is called memoizing. It saves time when a slow function, for example one that does a lot of work or waits on I/O, keeps getting called with the same arguments. The results are stored in a dictionary, so the arguments, positional and keyword, must be hashable.

You can change how it works. If maxsize is None, the LRU part is turned off and the cache can grow without any limit. If typed is true, arguments of different types are kept apart: f(3) and f(3.0) count as two different calls with two different results.

The wrapped function also gets two helpers. cache_info() gives back a named tuple with hits, misses, maxsize and currsize. cache_clear() empties the cache.

lru_cache was added in Python 3.2. Since Python 3.9, you can also use it as a plain decorator, without parentheses."""),
    Labelled("docs-lru-cache-first-half", "docs", "easy", "first_half", _LRU_CACHE, r"""functools.lru_cache is a decorator. You write it as @functools.lru_cache(maxsize=128, typed=False) above a function. It wraps the function so that it remembers answers: it keeps the results of up to maxsize of the most recent calls. This is called memoizing.

Why is that useful? Some functions are slow, because they do a lot of work or wait for input and output (I/O). If such a function is called again and again with the same arguments, the saved answer can be reused, and time is saved.

There is one rule. The results are stored in a dictionary, so all the arguments you pass to the function, positional and keyword alike, must be hashable.

If you set maxsize to None, the "least recently used" limit is turned off, and the cache can grow as big as it needs to."""),
    Labelled("docs-lru-cache-other-document", "docs", "tutorial", "other_document", _LRU_CACHE, r"""What you will learn: what pip install can install from, and the options you will reach for most often.

1. Sources. pip install installs packages from the Python Package Index (PyPI) and other indexes, from version control URLs, from local project directories, and from local or remote archive files. A requirement specifier such as "requests>=2.28,<3" limits which versions pip may pick.

2. Requirements files. Use -r <file> (or --requirement <file>) to install everything listed in a requirements file. You can give the option more than once.

3. Upgrading. -U or --upgrade upgrades all the packages you name to the newest available version. Dependencies follow the upgrade strategy; with the default, only-if-needed, a dependency is upgraded only when it no longer satisfies what the upgraded package requires.

4. Editable installs. -e or --editable <path/url> installs a project in editable ("develop") mode from a local path or a VCS URL, so changes to its source take effect without reinstalling.

5. Skipping dependencies. --no-deps tells pip not to install package dependencies.

6. Trying it first. --dry-run resolves the requirements and reports what would be installed without installing anything; it was added in pip 22.2.

Recap: pick your source, limit versions with a specifier, and use -r, -U, -e, --no-deps and --dry-run as needed."""),
    Labelled("docs-rebase-faithful", "docs", "easy", "faithful", _REBASE, r"""git rebase takes commits and applies them again on top of a new base. The command looks like this: git rebase [-i] [--onto <newbase>] [<upstream> [<branch>]].

If you give a <branch>, git switches to that branch first. If you don't, it works on the branch you are on. Next, git finds every commit in your branch that is not in <upstream> and saves those changes in a temporary area. It then resets your branch to <upstream>. Last, it applies the saved commits again, one by one, in the same order.

Sometimes a commit can't be applied cleanly. Then the rebase stops so you can fix the conflict. When the files are fixed, mark them as resolved with git add and run git rebase --continue. To skip the commit that caused the conflict, run git rebase --skip. To stop completely and put the branch back the way it was before the rebase began, run git rebase --abort.

The -i option (long form --interactive) opens an editor with a list of the commits about to be rebased. By editing the list you can reorder commits, drop them, or combine them with the squash and fixup commands before they are applied again."""),
    Labelled("docs-rebase-reworded", "docs", "distill", "reworded", _REBASE, r"""Rebasing transplants work onto a different foundation; the syntax is git rebase [-i] [--onto <newbase>] [<upstream> [<branch>]]. Given an optional branch name, git first checks that branch out; without one, the branch currently checked out is used. Git sets aside, in scratch storage, whatever changes belong to that branch's commits yet are absent from the upstream, moves the branch pointer so it matches the upstream, and then replays the set-aside commits in their original sequence. A replay that cannot go through cleanly halts the process so the clash can be settled: edit the affected files, flag them as settled with git add, then resume via git rebase --continue. Alternatively, git rebase --skip passes over the offending commit, while git rebase --abort halts everything and returns the branch to how it looked before the operation started. Interactive mode, -i or --interactive, first presents the pending commits as a list in an editor, where they may be rearranged, deleted, or merged together through the squash and fixup commands before the replay."""),
    Labelled("docs-rebase-changed-facts", "docs", "tutorial", "changed_facts", _REBASE, r"""In this tutorial you will learn how git rebase moves your commits onto a new base, and what to do when it stops on a conflict.

Step 1: Know the syntax. The command is git rebase [-i] [--onto <newbase>] [<upstream> [<branch>]]. Its job is to reapply commits on top of another base tip.

Step 2: Understand what happens. If you pass <branch>, git rebase switches to it first; otherwise it uses the current branch. Git saves the changes made by commits that are in the current branch but not in <upstream> to a temporary area, resets the branch to <upstream>, and then reapplies the saved commits one by one, in order.

Step 3: Handle conflicts. When a commit cannot be applied cleanly, the rebase stops so you can resolve the conflict. Fix the files, mark them as resolved with git add, and run git rebase --continue. If you want to stop and return the branch to the state it was in before the rebase began, run git rebase --skip; to leave out just the commit that caused the conflict, run git rebase --abort.

Step 4: Go interactive. With -i (--interactive), git opens an editor listing the commits about to be rebased. Edit the list to reorder commits, drop them, or combine them using squash and fixup before they are reapplied.

Recap: rebase saves your branch's own commits, resets the branch to the upstream and replays them; --continue, --skip and --abort steer it through conflicts; -i lets you edit the commit list first."""),
    Labelled("docs-rebase-doubled-paragraph", "docs", "tutorial", "doubled_paragraph", _REBASE, r"""This tutorial explains how to use git rebase to move commits onto another base, how to get through conflicts, and how to edit the commit list.

1. Syntax: git rebase [-i] [--onto <newbase>] [<upstream> [<branch>]].

2. What it does: rebase reapplies commits on top of another base tip. If you name a <branch>, git switches to it first; if not, it uses the current branch. The changes from commits that are in the current branch but not in <upstream> are put aside in a temporary area, the branch is reset to <upstream>, and the saved commits are applied again one at a time, in their original order.

3. Conflicts: if a commit does not apply cleanly, the rebase stops and you resolve the conflict. After fixing the files, mark them resolved with git add and run git rebase --continue. Run git rebase --skip to skip the commit that caused the conflict, or git rebase --abort to stop and return the branch to where it was before the rebase started.

If a commit does not apply cleanly, the rebase stops and you resolve the conflict. After fixing the files, mark them resolved with git add and then run git rebase --continue. Run git rebase --skip to skip the commit that caused the conflict, or git rebase --abort to stop and return the branch to where it was before the rebase started.

4. Interactive mode: -i (--interactive) opens an editor with the list of commits about to be rebased, where you can reorder them, drop them, or combine them with squash and fixup before they are reapplied.

Recap: rebase replays your commits on a new base; --continue, --skip and --abort handle conflicts; -i lets you edit the list first."""),
    Labelled("docs-rebase-other-document", "docs", "encyclopedic", "other_document", _REBASE, r"""Path.mkdir is a method of the pathlib module's Path class that creates a new directory at the path the object represents. Its signature is Path.mkdir(mode=0o777, parents=False, exist_ok=False). When a mode is given, it is combined with the umask value of the process to determine the file mode and access flags of the directory. If the path already exists, the method raises FileExistsError.

The parents argument controls how missing parent directories are handled. When it is true, any missing parents are created as needed, with default permissions and without taking mode into account, in the same way as the POSIX mkdir -p command. When it is false, which is the default, a missing parent causes FileNotFoundError to be raised.

The exist_ok argument, which was added in Python 3.5, controls the handling of an existing target. When it is false, the default, FileExistsError is raised if the directory already exists. When it is true, the error is suppressed unless the path already exists in the file system and is not a directory, again matching the behaviour of POSIX mkdir -p."""),
    Labelled("docs-pip-install-faithful", "docs", "encyclopedic", "faithful", _PIP_INSTALL, r"""pip install is the command of the pip package installer that installs Python packages. It can install them from the Python Package Index (PyPI) and other package indexes, from version control URLs, from local project directories, and from local or remote archive files. A requirement specifier, such as "requests>=2.28,<3", restricts the versions pip may select.

The command accepts a number of options. The -r or --requirement option installs from a given requirements file and may be used multiple times. The -U or --upgrade option upgrades all specified packages to the newest available version; how their dependencies are treated depends on the upgrade strategy, and the default strategy, only-if-needed, upgrades a dependency only when it no longer satisfies the requirements of the upgraded package. The -e or --editable option installs a project in editable mode, also called a "develop" install, from a local project path or a VCS URL, so that changes to the project's source take effect without reinstalling it. The --no-deps option prevents pip from installing package dependencies. The --dry-run option, added in pip 22.2, resolves the requirements and reports what would be installed without installing anything."""),
    Labelled("docs-pip-install-added-paragraph", "docs", "summary", "added_paragraph", _PIP_INSTALL, r"""pip install installs packages from PyPI and other indexes, version control URLs, local project directories and local or remote archives, with specifiers such as "requests>=2.28,<3" limiting versions. Key options are -r for requirements files (usable repeatedly), -U to upgrade to the newest versions, by default under the only-if-needed strategy, -e for editable installs, --no-deps to skip dependencies, and --dry-run, added in pip 22.2, to report what would be installed.

Recent versions of pip refuse to install into a system Python that is marked as externally managed unless you pass --break-system-packages. A virtual environment is therefore the recommended place to install packages."""),
    Labelled("docs-pip-install-first-half", "docs", "encyclopedic", "first_half", _PIP_INSTALL, r"""pip install is the pip command used to install Python packages. Packages can come from the Python Package Index (PyPI) and other indexes, from version control URLs, from local project directories, or from archive files stored locally or remotely. A requirement specifier, for example "requests>=2.28,<3", narrows the versions that pip is allowed to choose.

The -r option, or --requirement, installs the packages listed in a given requirements file, and it can be passed more than once. The -U option, or --upgrade, upgrades every specified package to the newest version available. What happens to dependencies is governed by the upgrade strategy: under the default strategy, only-if-needed, a dependency is upgraded only if it no longer satisfies the requirements of the package being upgraded."""),
    # -- code --------------------------------------------------------------------------
    Labelled("code-counter-faithful", "code", "code_tutorial", "faithful", _COUNTER, r"""In this tutorial you will learn how to find the most common words in a text with collections.Counter.

Step 1: Meet Counter. The collections module in the standard library provides Counter, a subclass of dict that is built for counting hashable objects.

Step 2: Write the function. top_words lowercases the text, splits it into words with a regular expression, and returns the n most common words together with their counts:

```python
import re
from collections import Counter


def top_words(text, n=3):
    words = re.findall(r"[a-z']+", text.lower())
    return Counter(words).most_common(n)


print(top_words("the cat and the hat and the bat"))
```

Step 3: Read the output. The call prints [('the', 3), ('and', 2), ('cat', 1)]. most_common() sorts the words from most to least frequent. Words that have the same count stay in the order in which they first appeared, so 'cat' is listed before 'hat'.

Step 4: Get every word. Pass n=None and the function returns all the words rather than just the top n.

Recap: Counter does the counting, re.findall does the splitting, and most_common(n) picks the most frequent words, with ties kept in first-seen order."""),
    Labelled("code-counter-reworded", "code", "code_commented", "reworded", _COUNTER, r'''Tallying how often each word occurs is a job for Counter, a dict subclass in the collections module whose purpose is counting hashable items. The helper below normalises the text to lower case, pulls out its words using a regex, and hands back the n words seen most often, each paired with its tally.

```python
import re
from collections import Counter


def top_words(text, n=3):
    """Return the n most frequent words of text as (word, count) pairs."""
    # Lower-case everything, then keep runs of letters and apostrophes as words.
    words = re.findall(r"[a-z']+", text.lower())
    # Counter tallies each word; most_common(n) sorts by descending count.
    # Pass n=None to get every word rather than only the top n.
    return Counter(words).most_common(n)


# Ties keep first-seen order, so 'cat' is listed ahead of 'hat'.
print(top_words("the cat and the hat and the bat"))
```

Executing this shows [('the', 3), ('and', 2), ('cat', 1)]. Ordering runs from the highest tally downward, and among equal tallies whichever word turned up earlier in the text comes first, which explains why 'cat' beats 'hat'.'''),
    Labelled("code-counter-changed-facts", "code", "code_tutorial", "changed_facts", _COUNTER, r"""What you will learn: how to use collections.Counter to list the most frequent words in a piece of text.

Counter lives in the standard library's collections module. It is a dictionary subclass made for counting hashable objects, which makes it a natural fit for word counts.

Here is the complete function. It lowercases the text, breaks it into words with a regular expression, and returns the n most common words along with how often each appears:

```python
import re
from collections import Counter


def top_words(text, n=3):
    words = re.findall(r"[a-z']+", text.lower())
    return Counter(words).most_common(n)


print(top_words("the cat and the hat and the bat"))
```

How it works:
1. re.findall(r"[a-z']+", text.lower()) lowercases the input and collects every run of letters and apostrophes as a word.
2. Counter(words) counts each word.
3. most_common(n) returns the n most frequent words with their counts.

Running the script prints [('the', 3), ('and', 2), ('cat', 1)]. most_common() orders words from the most frequent to the least frequent, and words with equal counts are sorted alphabetically, which is why 'cat' comes before 'hat'. If you pass n=None, you get every word back instead of just the top n.

Recap: with Counter and most_common() you can rank words by frequency in two lines of code."""),
    Labelled("code-counter-doubled-paragraph", "code", "code_tutorial", "doubled_paragraph", _COUNTER, r"""In this tutorial you will build a small function that reports the most common words in a text.

The tool for the job is Counter from the collections module of the standard library: a subclass of dictionary for counting hashable objects. Our function lowercases a text, splits it into words with a regular expression, and returns the n most common words with their counts.

```python
import re
from collections import Counter


def top_words(text, n=3):
    words = re.findall(r"[a-z']+", text.lower())
    return Counter(words).most_common(n)


print(top_words("the cat and the hat and the bat"))
```

When you run it, it prints [('the', 3), ('and', 2), ('cat', 1)]. most_common() orders the words from most to least frequent, and words with equal counts keep the order in which they were first seen, which is why 'cat' comes before 'hat'.

When you run it, it prints [('the', 3), ('and', 2), ('cat', 1)]. most_common() orders the words from most to least frequent, and words with equal counts keep the order in which they were first seen; that is why 'cat' comes before 'hat'.

Passing n=None returns every word instead of only the top n.

Recap: Counter counts, most_common() ranks, and ties keep their first-seen order."""),
    Labelled("code-counter-first-half", "code", "code_tutorial", "first_half", _COUNTER, r"""In this tutorial you will learn how to count words in Python with collections.Counter.

First, some background. The collections module of the standard library includes the Counter class, a subclass of dictionary whose job is counting hashable objects.

Next, the code. The function below takes a text, converts it to lowercase, splits it into words using a regular expression, and returns the n most common words along with their counts:

```python
import re
from collections import Counter


def top_words(text, n=3):
    words = re.findall(r"[a-z']+", text.lower())
    return Counter(words).most_common(n)


print(top_words("the cat and the hat and the bat"))
```

The last line calls the function on a short sample sentence and prints the result."""),
    Labelled("code-csv-sum-faithful", "code", "code_commented", "faithful", _CSV_SUM, r'''Python's csv module can read a file one row at a time as dictionaries whose keys come from the file's first line. The function below uses it to add up the amount column of a sales file.

```python
import csv


def total_amount(path):
    """Return the sum of the amount column of the CSV file at path."""
    total = 0.0
    # newline="" lets the csv module handle line endings itself, so quoted
    # fields that contain line breaks are read correctly.
    with open(path, newline="", encoding="utf-8") as f:
        # DictReader uses the first line of the file as the keys of each row.
        for row in csv.DictReader(f):
            # Every value is a string: convert it before adding it up.
            # float("") raises ValueError for an empty amount, and a file with
            # no amount column raises KeyError on the first row.
            total += float(row["amount"])
    return total
```

The file is opened with newline="" because csv handles line endings on its own; without it, a quoted field containing a line break may be read wrongly. DictReader returns every value as a string, hence the float() conversion. An empty amount makes float() raise ValueError, and a missing amount column makes row["amount"] raise KeyError on the first row.'''),
    Labelled("code-csv-sum-reworded", "code", "code_tutorial", "reworded", _CSV_SUM, r"""What this tutorial covers: totalling one column of a CSV file with nothing but the standard library.

The idea. The csv module offers DictReader, which walks through a file record by record and presents each record as a mapping, with the header line supplying the field names. We will use it to compute the sum of every figure under the amount heading of a file of sales.

The code:

```python
import csv


def total_amount(path):
    total = 0.0
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            total += float(row["amount"])
    return total
```

Why newline="" in the open() call? Line-ending handling is something the csv module prefers to do by itself. Leave that argument out and a value wrapped in quotes that spans more than one line might come back mangled.

Why float()? DictReader never gives you numbers: everything it yields is text. Each figure therefore has to be turned into a floating-point value before it can join the running total.

What can go wrong? A record whose amount cell is blank makes float() complain with ValueError. A file lacking any amount heading fails at the very first record, where the lookup row["amount"] throws KeyError.

Recap: open with newline="", iterate with DictReader, convert with float(), and watch for those two exceptions."""),
    Labelled("code-csv-sum-added-paragraph", "code", "code_tutorial", "added_paragraph", _CSV_SUM, r"""In this tutorial you will learn how to total a column in a CSV file with Python's csv module.

Step 1: The csv module can read a file row by row as dictionaries, taking the keys from the first line of the file. That lets us refer to a column by its name.

Step 2: Here is a function that adds up the amount column of a sales file:

```python
import csv


def total_amount(path):
    total = 0.0
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            total += float(row["amount"])
    return total
```

Step 3: Note the details. The file is opened with newline="" because the csv module handles line endings itself; without it, a quoted field that contains a line break may be read wrongly. DictReader returns every value as a string, so each amount goes through float() before it is added to the total. Two errors are possible: an empty amount makes float() raise ValueError, and a file with no amount column makes row["amount"] raise KeyError on the first row.

If you already use pandas, the same total takes one line: pandas.read_csv(path)["amount"].sum(). pandas converts the column to numbers for you and skips empty cells when summing, treating them as missing values. For very large files, however, reading row by row with the csv module uses far less memory."""),
    Labelled("code-csv-sum-doubled-paragraph", "code", "code_commented", "doubled_paragraph", _CSV_SUM, r'''The csv module reads a file row by row as dictionaries, with the first line of the file supplying the keys. This example sums the amount column of a sales file.

```python
import csv


def total_amount(path):
    """Add up the amount column of the sales file at path."""
    total = 0.0
    # newline="" leaves line endings to the csv module.
    with open(path, newline="", encoding="utf-8") as f:
        # Each row is a dict keyed by the header line.
        for row in csv.DictReader(f):
            # Values come back as strings, so convert before adding.
            total += float(row["amount"])
    return total
```

The file is opened with newline="" because the csv module handles line endings itself; without it, a quoted field that contains a line break may be read wrongly. Every value DictReader returns is a string, which is why each amount is passed through float().

The file is opened with newline="" because the csv module handles line endings itself; without it, a quoted field containing a line break may be read wrongly. Every value DictReader returns is a string, which is why each amount is passed through float().

An empty amount makes float() raise ValueError, and a file with no amount column makes row["amount"] raise KeyError on the first row.'''),
    Labelled("code-csv-sum-other-document", "code", "code_tutorial", "other_document", _CSV_SUM, r"""This lesson walks through a classic algorithm: binary search over a sorted Python list.

Binary search repeatedly halves the part of the list that could still contain the item. It compares the target with the middle element, then throws away the half where the target cannot be. That is why a list of a million items needs at most about 20 comparisons.

```python
def binary_search(items, target):
    lo, hi = 0, len(items) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if items[mid] == target:
            return mid
        if items[mid] < target:
            lo = mid + 1
        else:
            hi = mid - 1
    return -1
```

The function returns the index of target, or -1 when it is not in the list. The variables lo and hi are the inclusive bounds of the range still being searched, and the loop stops once they cross. Keep in mind that the list must already be sorted in ascending order: given an unsorted list, the function can return -1 even though the item is present.

Recap: binary search is fast because each step halves the search range. For real code, reach for the standard library's bisect module, which provides tested functions for the same job."""),
    Labelled("code-retry-faithful", "code", "code_tutorial", "faithful", _RETRY, r"""What you will learn: how to write a decorator that retries a failing network call, waiting longer after each failure.

Network calls sometimes fail for reasons that go away on their own, such as a timeout or a dropped connection. Instead of writing a loop around every call, we will put the retry logic in a decorator.

Here is the complete code:

```python
import functools
import time


def retry(times=3, delay=0.5):
    def decorate(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            for attempt in range(times):
                try:
                    return func(*args, **kwargs)
                except ConnectionError:
                    if attempt == times - 1:
                        raise
                    time.sleep(delay * 2 ** attempt)
        return wrapper
    return decorate
```

Walking through it:

1. retry(times=3, delay=0.5) is a decorator factory. It returns decorate, which receives the function and returns wrapper.
2. wrapper calls the decorated function up to times times, returning its result as soon as a call succeeds.
3. Only ConnectionError is caught. Any other exception is raised straight away, without a retry.
4. After each failed attempt, wrapper sleeps for delay * 2 ** attempt seconds. With the defaults that is 0.5 seconds after the first failure and 1 second after the second.
5. If the last attempt fails too, the error is re-raised to the caller.
6. functools.wraps copies the name and docstring of the original function onto the wrapper.

Recap: the decorator retries on ConnectionError only, backs off exponentially, and gives up by re-raising the last failure."""),
    Labelled("code-retry-reworded", "code", "code_tutorial", "reworded", _RETRY, r"""Goal of this lesson: package "try again, but wait a little longer each time" behaviour into something reusable.

Remote requests occasionally break down temporarily, say because the other side was slow to answer or the link dropped, and such problems often clear up without intervention. Surrounding each request with hand-written looping gets repetitive, so the logic can live inside a decorator instead.

```python
import functools
import time


def retry(times=3, delay=0.5):
    def decorate(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            for attempt in range(times):
                try:
                    return func(*args, **kwargs)
                except ConnectionError:
                    if attempt == times - 1:
                        raise
                    time.sleep(delay * 2 ** attempt)
        return wrapper
    return decorate
```

Key points about this implementation:

- The number of tries is capped by the times argument.
- Solely ConnectionError triggers another go; every other kind of error propagates to the caller at once.
- Between tries the pause is delay * 2 ** attempt seconds, which doubles after every failure. Under the default settings that means half a second first, then a full second.
- When the final try also fails, its exception is raised again rather than swallowed.
- Thanks to functools.wraps, the wrapped callable keeps the original's name and docstring.

To sum up: limited attempts, exponentially growing pauses, and only connection problems are retried."""),
    Labelled("code-retry-changed-facts", "code", "code_commented", "changed_facts", _RETRY, r'''Network calls sometimes fail for reasons that clear up by themselves, such as a timeout or a dropped connection, so rather than looping around every call, the retry logic goes into a decorator.

```python
import functools
import time


def retry(times=3, delay=0.5):
    """Retry the decorated function on ConnectionError, up to times calls."""
    def decorate(func):
        # functools.wraps copies func's name and docstring onto wrapper.
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            for attempt in range(times):
                try:
                    return func(*args, **kwargs)
                except ConnectionError:
                    # Out of attempts: re-raise the last failure to the caller.
                    if attempt == times - 1:
                        raise
                    # Back off exponentially before the next attempt.
                    time.sleep(delay * 2 ** attempt)
        return wrapper
    return decorate
```

The decorated function is called at most times times. Only ConnectionError is caught; any other exception propagates immediately. After each failed attempt the wrapper sleeps for delay * 2 ** attempt seconds, so with the defaults it waits 1 second and then 2 seconds before the final attempt, and the last failure is re-raised.'''),
    Labelled("code-retry-doubled-paragraph", "code", "code_tutorial", "doubled_paragraph", _RETRY, r"""This tutorial shows how to retry a network call automatically, with a growing pause between attempts.

Network calls fail every so often for reasons that go away by themselves, a timeout or a dropped connection for instance. Rather than writing a loop around each call, you can keep the retry logic in one decorator, as below.

```python
import functools
import time


def retry(times=3, delay=0.5):
    def decorate(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            for attempt in range(times):
                try:
                    return func(*args, **kwargs)
                except ConnectionError:
                    if attempt == times - 1:
                        raise
                    time.sleep(delay * 2 ** attempt)
        return wrapper
    return decorate
```

The wrapper calls the decorated function at most times times and catches only ConnectionError, so any other exception reaches the caller immediately. After each failure it sleeps delay * 2 ** attempt seconds: with the defaults, 0.5 seconds and then 1 second. The final failure is re-raised.

The wrapper calls the decorated function at most times times and catches only ConnectionError, so any other exception reaches the caller immediately. After each failure it sleeps delay * 2 ** attempt seconds: with the defaults, 0.5 seconds and then 1 second. The final failure is re-raised to the caller.

Finally, functools.wraps copies the name and docstring of the original function onto the wrapper.

Recap: a few lines of decorator code give you retries with exponential backoff."""),
    Labelled("code-retry-first-half", "code", "code_tutorial", "first_half", _RETRY, r"""In this tutorial you will learn how to retry network calls automatically by putting the logic in a decorator.

Why bother? Network calls fail now and then for reasons that clear up on their own, for example a timeout or a dropped connection. Writing a loop around every single call quickly gets repetitive, and a decorator lets you write the retry logic once.

Here is the decorator, with exponential backoff between attempts:

```python
import functools
import time


def retry(times=3, delay=0.5):
    def decorate(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            for attempt in range(times):
                try:
                    return func(*args, **kwargs)
                except ConnectionError:
                    if attempt == times - 1:
                        raise
                    time.sleep(delay * 2 ** attempt)
        return wrapper
    return decorate
```"""),
    Labelled("code-bisect-faithful", "code", "code_commented", "faithful", _BISECT, r'''Binary search locates an item in a sorted list by halving, again and again, the part of the list where it could still be. At each step the target is compared with the middle element, and the half that cannot contain it is thrown away; that is why a list of a million items needs at most about 20 comparisons.

```python
def binary_search(items, target):
    """Return the index of target in the sorted list items, or -1 if absent."""
    # lo and hi are the inclusive bounds of the range still being searched.
    lo, hi = 0, len(items) - 1
    # The loop ends when the bounds cross: nothing is left to search.
    while lo <= hi:
        mid = (lo + hi) // 2
        if items[mid] == target:
            return mid
        # The target can only be in the upper half.
        if items[mid] < target:
            lo = mid + 1
        # The target can only be in the lower half.
        else:
            hi = mid - 1
    return -1
```

The input must already be in ascending order: given an unsorted list, the function may return -1 even though the item is there. In real code, use the standard library's bisect module, whose tested functions do the same job.'''),
    Labelled("code-bisect-reworded", "code", "code_tutorial", "reworded", _BISECT, r"""By the end of this walkthrough you will understand how to locate a value inside an ordered list quickly.

The trick is to keep cutting the candidate region in two. At every round, look at the element sitting in the centre of what remains and compare it with the value you want; whichever side cannot possibly contain that value gets discarded. Because the region shrinks by half each time, even a collection with one million entries is settled within roughly twenty checks.

```python
def binary_search(items, target):
    lo, hi = 0, len(items) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if items[mid] == target:
            return mid
        if items[mid] < target:
            lo = mid + 1
        else:
            hi = mid - 1
    return -1
```

What the pieces do:

- lo and hi are the first and last positions still under consideration, both included. Once lo passes hi, nothing is left to examine.
- mid is the centre position. A hit there returns the position at once; otherwise lo or hi moves past mid.
- A result of -1 signals that the value is absent.

A caveat: the input must be arranged from smallest to largest beforehand. Feed it a jumbled list and it may report -1 for a value that is actually there.

Takeaway: the logic is short, yet for production work the bisect module that ships with Python already offers well-tested routines doing the same thing."""),
    Labelled("code-bisect-added-paragraph", "code", "code_tutorial", "added_paragraph", _BISECT, r"""In this tutorial you will learn how binary search works and how to implement it in Python.

The idea: binary search looks for an item in a sorted list by repeatedly halving the part of the list that could still contain it. At each step it compares the target with the middle element and discards the half where the target cannot be. Because of this halving, a list of a million items needs at most about 20 comparisons.

The implementation:

```python
def binary_search(items, target):
    lo, hi = 0, len(items) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if items[mid] == target:
            return mid
        if items[mid] < target:
            lo = mid + 1
        else:
            hi = mid - 1
    return -1
```

How it works: lo and hi mark the inclusive bounds of the range still being searched, and the loop ends when they cross. If the middle element equals the target, its index is returned; otherwise the search continues in the half that can still contain it. If the loop ends without a match, the function returns -1.

A warning: the list must already be sorted in ascending order. On an unsorted list the function can return -1 even when the item is present. For real code, the standard library's bisect module provides tested functions for the same job.

Binary search is famously easy to get subtly wrong. Jon Bentley reported in Programming Pearls that most of the professional programmers he asked could not write a correct version, and in 2006 Joshua Bloch showed that computing the midpoint as (lo + hi) / 2 overflowed in Java's standard library for very large arrays. Python's integers do not overflow, so the same expression is safe here."""),
    # -- math --------------------------------------------------------------------------
    Labelled("math-speed-faithful", "math", "math_solution", "faithful", _SPEED, r"""**Problem.** A cyclist rides 45 km from her home to a lake in 2.5 hours and takes 3 hours for the same 45 km on the way back. Find her average speed on each leg and for the whole trip.

**Step 1: State the definition.** Average speed is the total distance travelled divided by the total time taken:
$$v = \frac{d}{t}.$$
With distance in kilometres and time in hours, $v$ comes out in kilometres per hour.

**Step 2: The outward leg.** She covers 45 km in 2.5 hours, so
$$v = \frac{45}{2.5} = 18 \text{ km/h}.$$

**Step 3: The return leg.** She is tired and needs 3 hours for the same 45 km:
$$\frac{45}{3} = 15 \text{ km/h}.$$

**Step 4: Avoid the common mistake.** Simply averaging the two speeds gives 16.5 km/h, but that is not her average speed for the trip.

**Step 5: The whole trip.** Use the total distance and the total time: she rides 90 km in 5.5 hours, so
$$v = \frac{90}{5.5} \approx 16.36 \text{ km/h}.$$

**Step 6: Interpret the result.** The answer is lower than 16.5 because she spends more time riding at the slower speed.

**Final answer:** 18 km/h on the way there, 15 km/h on the way back, and about 16.36 km/h for the whole trip."""),
    Labelled("math-speed-reworded", "math", "math_textbook", "reworded", _SPEED, r"""## Average speed

How fast, on the whole, does something move over a journey? We measure this with the *average speed*.

**Definition.** The average speed $v$ of a journey equals the entire distance covered, $d$, divided by the entire time spent, $t$:
$$v = \frac{d}{t}.$$
Measuring $d$ in kilometres and $t$ in hours yields $v$ in kilometres per hour.

**Worked example 1.** Leaving home, a cyclist reaches a lake 45 km off after 2.5 hours in the saddle. For this outbound stretch,
$$v = \frac{45}{2.5} = 18$$ km/h.

**Worked example 2.** Coming home, fatigue sets in and the identical 45 km take her 3 hours, so her pace drops to
$$\frac{45}{3} = 15$$ km/h.

**Worked example 3: the round trip.** It is tempting to take the mean of the two pace figures, which gives 16.5 km/h. That reasoning is flawed. The definition asks for the overall distance and the overall time, so
$$v = \frac{90}{5.5} \approx 16.36$$ km/h.

**Remark.** The correct figure falls short of 16.5 since a larger share of the journey's duration is spent at the lower pace."""),
    Labelled("math-speed-changed-facts", "math", "math_textbook", "changed_facts", _SPEED, r"""## Average speed

**Definition.** The average speed of a journey is the total distance travelled divided by the total time taken:
$$v = \frac{d}{t}.$$
When distance is measured in kilometres and time in hours, the speed is in kilometres per hour.

**Example.** A cyclist rides 45 km from her home to a lake. The outward ride takes her 3 hours, so her average speed on the way there is
$$\frac{45}{3} = 15$$ km/h.

On the way back she covers the same 45 km in 2.5 hours, which gives
$$v = \frac{45}{2.5} = 18$$ km/h.

**Average for the whole trip.** A common mistake is to average the two speeds, which gives 16.5 km/h. The correct approach divides the total distance by the total time:
$$v = \frac{90}{5.5} \approx 16.36$$ km/h.
This is lower than 16.5 because she spends more time riding at the slower speed."""),
    Labelled("math-speed-doubled-paragraph", "math", "math_solution", "doubled_paragraph", _SPEED, r"""**Step 1.** Average speed is the total distance divided by the total time, $v = \frac{d}{t}$. With distance in kilometres and time in hours, the speed is in kilometres per hour.

**Step 2.** On the way to the lake the cyclist rides 45 km in 2.5 hours, so her average speed is $v = \frac{45}{2.5} = 18$ km/h.

**Step 3.** On the way back she is tired and needs 3 hours for the same 45 km. Her speed is therefore $\frac{45}{3} = 15$ km/h.

**Step 3.** On the way back she is tired and needs 3 hours for the same 45 km. Her speed is therefore $\frac{45}{3} = 15$ km/h.

**Step 4.** It is a common mistake to average the two speeds and get 16.5 km/h. For the whole trip we must use the total distance and the total time: $v = \frac{90}{5.5} \approx 16.36$ km/h.

**Step 5.** This is lower than 16.5 because she spends more time riding at the slower speed.

**Final answer:** about 16.36 km/h for the whole trip."""),
    Labelled("math-speed-first-half", "math", "math_solution", "first_half", _SPEED, r"""**Step 1: Recall the definition.** Average speed is the total distance travelled divided by the total time taken, $v = \frac{d}{t}$. When distance is measured in kilometres and time in hours, the speed comes out in kilometres per hour.

**Step 2: Identify the given values.** The cyclist rides from her home to a lake, a distance of $d = 45$ km, and the ride takes $t = 2.5$ hours.

**Step 3: Substitute.** Putting these values into the formula,
$$v = \frac{45}{2.5} = 18,$$
so her average speed on the way there is 18 km/h.

**Final answer:** 18 km/h."""),
    Labelled("math-arithmetic-faithful", "math", "math_textbook", "faithful", _ARITHMETIC, r"""## Arithmetic sequences

An *arithmetic sequence* is a list of numbers in which every term after the first is obtained by adding a fixed number to the previous term. This fixed number is called the *common difference* and is written $d$.

**Formula for the $n$-th term.** If the first term is $a_1$, then the $n$-th term is
$$a_n = a_1 + (n - 1)d.$$

**Example 1.** The sequence 3, 7, 11, 15, ... has first term 3 and common difference 4. Its 10th term is
$$a_{10} = 3 + 9 \cdot 4 = 39.$$

**Sum of the first $n$ terms.** The sum of the first $n$ terms is
$$S_n = \frac{n(a_1 + a_n)}{2},$$
that is, the number of terms multiplied by the average of the first and last terms.

**Example 2.** For the sequence above, the sum of the first 10 terms is
$$S_{10} = \frac{10(3 + 39)}{2} = 210.$$

**Why the formula holds.** Write the sum forwards and then backwards, one line under the other, and add the two lines. Each of the $n$ columns adds up to $a_1 + a_n$, so twice the sum is $n(a_1 + a_n)$; dividing by 2 gives the formula."""),
    Labelled("math-arithmetic-reworded", "math", "math_solution", "reworded", _ARITHMETIC, r"""**Task.** Starting from how an arithmetic sequence is built, derive its general term and the sum of its opening terms, and apply both to 3, 7, 11, 15, ...

**Step 1 (what the sequence is).** Each entry after the opening one arises from its predecessor by adding the same constant, the common difference $d$. Call the opening entry $a_1$.

**Step 2 (general term).** Getting to position $n$ requires $n - 1$ additions of $d$, hence $a_n = a_1 + (n - 1)d$.

**Step 3 (apply it).** For 3, 7, 11, 15, ... the opening entry is 3 and consecutive entries differ by 4. Position ten therefore holds $a_{10} = 3 + 9 \cdot 4 = 39$.

**Step 4 (why the sum formula works).** List the $n$ entries in increasing order, and underneath list them again in reverse. Adding column by column, every one of the $n$ columns totals $a_1 + a_n$. Halving the grand total gives $S_n = \frac{n(a_1 + a_n)}{2}$, i.e. how many entries there are times the mean of the outermost two.

**Step 5 (apply it).** Summing the opening 10 entries of our sequence: $S_{10} = \frac{10(3 + 39)}{2} = 210$.

**Final answer.** $a_{10} = 39$ and $S_{10} = 210$."""),
    Labelled("math-arithmetic-added-paragraph", "math", "math_textbook", "added_paragraph", _ARITHMETIC, r"""## Arithmetic sequences

**Definition.** A sequence is *arithmetic* if each term after the first is obtained by adding the same fixed number to the term before it. That fixed number is the *common difference*, denoted $d$. Writing $a_1$ for the first term, the $n$-th term is given by
$$a_n = a_1 + (n - 1)d.$$

**Worked example.** Consider 3, 7, 11, 15, ... Here the first term is 3 and the common difference is 4, so the 10th term is $a_{10} = 3 + 9 \cdot 4 = 39$.

**The sum formula.** The sum of the first $n$ terms equals the number of terms times the average of the first and last terms:
$$S_n = \frac{n(a_1 + a_n)}{2}.$$
To see this, write the sum forwards and backwards and add the two lines term by term: each of the $n$ columns adds up to $a_1 + a_n$.

**Worked example.** For our sequence, the first 10 terms add up to $S_{10} = \frac{10(3 + 39)}{2} = 210$.

A famous story tells that the young Carl Friedrich Gauss used this trick at school when his teacher asked the class to add up the whole numbers from 1 to 100. He paired 1 with 100, 2 with 99 and so on, obtaining 50 pairs that each sum to 101, and gave the answer 5050 almost at once."""),
    Labelled("math-arithmetic-other-document", "math", "math_textbook", "other_document", _ARITHMETIC, r"""## Interest on an investment

**Setting.** A principal $P$ is invested at an annual interest rate $r$ for $t$ years.

**Simple interest.** Interest is earned on the principal only, so the interest after $t$ years is
$$I = Prt.$$

**Compound interest.** Each year's interest is added to the balance and then earns interest in turn. The balance after $t$ years is
$$A = P(1 + r)^t.$$

**Example.** Maria invests 2,000 dollars at 5% a year for 3 years. With simple interest,
$$I = 2000 \times 0.05 \times 3 = 300$$
dollars, so her final amount is 2,300 dollars. With annual compounding,
$$A = 2000(1.05)^3 = 2315.25$$
dollars, so the interest is 315.25 dollars: 15.25 dollars more than under simple interest.

As the number of years increases, the difference between the two grows quickly."""),
    Labelled("math-interest-faithful", "math", "math_solution", "faithful", _INTEREST, r"""**Problem.** Maria invests 2,000 dollars at 5% per year for 3 years. Compare the interest she earns with simple interest and with interest compounded once a year.

**Step 1: Set up the notation.** Let $P$ be the principal, $r$ the annual interest rate and $t$ the number of years.

**Step 2: Simple interest.** Interest is paid only on the principal, so the interest earned is $I = Prt$. With $P = 2000$, $r = 0.05$ and $t = 3$:
$$I = 2000 \times 0.05 \times 3 = 300$$ dollars.
She therefore ends with 2,300 dollars.

**Step 3: Compound interest.** Each year's interest is added to the balance and itself earns interest, so after $t$ years the balance is $A = P(1 + r)^t$. Here
$$A = 2000(1.05)^3 = 2315.25$$ dollars,
which means she earns 315.25 dollars of interest.

**Step 4: Compare.** Compounding gives 315.25 - 300 = 15.25 dollars more than simple interest. The gap grows quickly as the number of years increases.

**Final answer:** 300 dollars of simple interest against 315.25 dollars with yearly compounding, a difference of 15.25 dollars."""),
    Labelled("math-interest-reworded", "math", "math_textbook", "reworded", _INTEREST, r"""## Simple and compound interest

Suppose an amount $P$, called the principal, is placed in an account paying a yearly rate $r$, and left there for $t$ years. Two rules for crediting returns are common.

**Simple interest.** Returns accrue on the original deposit alone. The total gained is therefore
$$I = Prt.$$

**Compound interest.** Every year the return is credited to the account, after which it too generates returns. After $t$ years the account holds
$$A = P(1 + r)^t.$$

**Worked example.** Maria deposits 2,000 dollars for 3 years at a yearly rate of 5%.

*Under the simple rule*, she gains $I = 2000 \times 0.05 \times 3 = 300$ dollars, leaving her with 2,300 dollars altogether.

*Under yearly compounding*, her account reaches $A = 2000(1.05)^3 = 2315.25$ dollars. Her gain is thus 315.25 dollars, an advantage of 15.25 dollars over the simple rule.

**Remark.** The longer the money stays invested, the faster the two outcomes pull apart."""),
    Labelled("math-interest-changed-facts", "math", "math_solution", "changed_facts", _INTEREST, r"""**Step 1.** Let $P$ be the principal, $r$ the annual interest rate and $t$ the time in years.

**Step 2: Simple interest.** With simple interest, each year's interest is added to the balance and earns interest itself, so the interest earned is $I = Prt$. For Maria's 2,000 dollars at 5% for 3 years:
$$I = 2000 \times 0.05 \times 3 = 300$$ dollars, so she ends with 2,300 dollars.

**Step 3: Compound interest.** With compound interest, interest is paid only on the principal, and the balance after $t$ years is $A = P(1 + r)^t$:
$$A = 2000(1.05)^3 = 2315.25$$ dollars, so she earns 315.25 dollars of interest.

**Step 4: Compare.** Compounding yields 15.25 dollars more than simple interest, and the gap grows quickly as the number of years increases.

**Final answer:** 300 dollars (simple) against 315.25 dollars (compound), a difference of 15.25 dollars."""),
    Labelled("math-pythagoras-faithful", "math", "math_textbook", "faithful", _PYTHAGORAS, r"""## The Pythagorean theorem

**Theorem.** In a right triangle with legs $a$ and $b$ and hypotenuse $c$,
$$a^2 + b^2 = c^2.$$
The hypotenuse is the side opposite the right angle, and it is always the longest side of the triangle.

**Worked example.** A ladder 13 m long leans against a vertical wall. Its foot stands on level ground, 5 m from the base of the wall. How high up the wall does the ladder reach?

*Solution.* The wall, the ground and the ladder form a right triangle in which the ladder is the hypotenuse. Let $h$ be the height the ladder reaches. By the theorem,
$$5^2 + h^2 = 13^2,$$
so
$$h^2 = 169 - 25 = 144,$$
and therefore $h = 12$ m.

**The converse.** The theorem also works in reverse: if the sides of a triangle satisfy $a^2 + b^2 = c^2$, then the triangle has a right angle.

**Application.** Builders use the converse to check that a corner is square with a 3-4-5 triangle. They mark 3 units along one wall and 4 units along the other; if the two marks are exactly 5 units apart, the corner is a right angle."""),
    Labelled("math-pythagoras-reworded", "math", "math_solution", "reworded", _PYTHAGORAS, r"""**Given.** A 13 m ladder rests against an upright wall; its lower end sits on flat ground 5 m out from the wall's base. **Find** the height at which its top touches the wall.

**Step 1 (the tool).** For any triangle containing a right angle, label the two sides that meet at that angle $a$ and $b$ and the remaining side $c$ (the hypotenuse, lying across from the right angle and exceeding each of the others in length). Pythagoras' theorem says $a^2 + b^2 = c^2$.

**Step 2 (spot the triangle).** Wall, floor and ladder enclose a right-angled triangle, and the ladder lies across from the right angle, so it plays the role of $c$. Write $h$ for the unknown height.

**Step 3 (substitute).** $5^2 + h^2 = 13^2$.

**Step 4 (solve).** $h^2 = 169 - 25 = 144$, and taking the positive root, $h = 12$ m.

**Side remark (reverse direction).** The implication runs both ways: side lengths obeying $a^2 + b^2 = c^2$ force a right angle. Tradespeople exploit this with the 3-4-5 rule: measure 3 units out along one wall and 4 along the adjacent one; a gap of precisely 5 units between the two marks confirms a true right-angled corner.

**Final answer.** The ladder reaches 12 m up the wall."""),
    Labelled("math-pythagoras-added-paragraph", "math", "math_textbook", "added_paragraph", _PYTHAGORAS, r"""## Right triangles and the Pythagorean theorem

In a right triangle, the side opposite the right angle is called the *hypotenuse*; it is always the longest side. The other two sides are the *legs*.

**Theorem (Pythagoras).** If a right triangle has legs $a$ and $b$ and hypotenuse $c$, then
$$a^2 + b^2 = c^2.$$

**Example (a ladder against a wall).** A 13 m ladder leans against a vertical wall with its foot on level ground 5 m from the base of the wall. To find how high it reaches, note that the wall, the ground and the ladder form a right triangle whose hypotenuse is the ladder. Writing $h$ for the height,
$$5^2 + h^2 = 13^2, \qquad h^2 = 169 - 25 = 144, \qquad h = 12 \text{ m}.$$

**Converse.** Conversely, if the side lengths of a triangle satisfy $a^2 + b^2 = c^2$, the triangle has a right angle. This is why builders can check a square corner with a 3-4-5 triangle: mark 3 units along one wall and 4 units along the other, and the corner is a right angle exactly when the marks are 5 units apart.

**Historical note.** The theorem is named after the Greek philosopher Pythagoras of Samos, who lived in the sixth century BC, but the relation was known much earlier. A Babylonian clay tablet known as Plimpton 322, written around 1800 BC, lists sets of whole numbers that satisfy it."""),
    Labelled("math-pythagoras-doubled-paragraph", "math", "math_textbook", "doubled_paragraph", _PYTHAGORAS, r"""## The Pythagorean theorem

**Statement.** For a right triangle with legs $a$ and $b$ and hypotenuse $c$, we have $a^2 + b^2 = c^2$. The hypotenuse lies opposite the right angle and is always the longest side.

**Problem.** A 13 m ladder leans against a vertical wall, and its foot is 5 m from the base of the wall on level ground. How high up the wall does it reach?

**Solution.** The wall, the ground and the ladder make a right triangle, with the ladder as hypotenuse. Let $h$ be the height reached. Then $5^2 + h^2 = 13^2$, which gives $h^2 = 169 - 25 = 144$ and so $h = 12$ m.

**Solution.** The wall, the ground and the ladder make a right triangle, with the ladder as the hypotenuse. Let $h$ be the height reached. Then $5^2 + h^2 = 13^2$, which gives $h^2 = 169 - 25 = 144$, and so $h = 12$ m.

**Converse.** If the sides of a triangle satisfy $a^2 + b^2 = c^2$, the triangle has a right angle. Builders use this to check a square corner with a 3-4-5 triangle: 3 units are marked along one wall and 4 units along the other, and the corner is a right angle when the marks are exactly 5 units apart."""),
    Labelled("math-pythagoras-first-half", "math", "math_textbook", "first_half", _PYTHAGORAS, r"""## The Pythagorean theorem

**Statement of the theorem.** Consider a right triangle whose legs have lengths $a$ and $b$ and whose hypotenuse has length $c$. Then
$$a^2 + b^2 = c^2.$$
Here the hypotenuse is the side opposite the right angle, and it is always the longest of the three sides.

**Worked example.** A ladder that is 13 m long leans against a vertical wall. Its foot rests on level ground, 5 m away from the base of the wall. We want to know how high up the wall the ladder reaches.

The wall, the ground and the ladder together form a right triangle, and the ladder is its hypotenuse. Let $h$ denote the height reached by the ladder. Applying the theorem, we get
$$5^2 + h^2 = 13^2.$$
Therefore $h^2 = 169 - 25 = 144$, and so $h = 12$ m: the ladder reaches 12 m up the wall."""),
)
