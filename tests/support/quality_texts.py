"""Labelled texts for the quality gate's tests: a source, rewrites that pass, outputs
that earn one reason each."""

SOURCE = ("The cmd module provides a simple framework for writing line-oriented command "
          "interpreters. These are often useful for test harnesses, administrative tools, "
          "and prototypes that will later be wrapped in a more sophisticated interface.")
REWRITE = ("This framework helps developers build interpreters that read one command per "
           "line. Such programs serve well as testing harnesses, admin utilities and early "
           "prototypes before a richer interface arrives.")
SUMMARY = "The cmd module is a framework for line-based command interpreters."
REFUSAL = ("I'm sorry, but I cannot rewrite this text as it may be copyrighted and I do not "
           "want to cause any harm to its authors.")
GERMAN = ("Dieses Modul bietet ein einfaches Gerüst zum Schreiben zeilenorientierter "
          "Befehlsinterpreter, die oft für Testumgebungen, Verwaltungswerkzeuge und Prototypen "
          "nützlich sind.")

# -- the domain checks (keep_code, keep_numbers, output_shape): a source each, and for
# each shipped template that declares a check a clean output that must pass
FENCE = "`" * 3
CODE_SOURCE = f"""The helper below merges two settings dictionaries, the second one winning, and
the JSON file holds the defaults it starts from.

{FENCE}python
def merge(base, override):
    \"\"\"Return base updated with override.\"\"\"
    merged = dict(base)
    merged.update(override)
    return merged
{FENCE}

{FENCE}json
{{"retries": 3, "timeout_s": 30}}
{FENCE}
"""
CODE_TUTORIAL = f"""In this tutorial you will learn how to combine two configuration mappings so
that values from the second take precedence over the first.

Start from the defaults, kept as JSON:

{FENCE}json
{{"retries": 3, "timeout_s": 30}}
{FENCE}

Then read the function step by step. It copies the base mapping first, so the caller's
object is never modified, applies every key of the override on top of the copy, and
hands the copy back:

{FENCE}python
def merge(base, override):
    \"\"\"Return base updated with override.\"\"\"
    merged = dict(base)
    merged.update(override)
    return merged
{FENCE}

Recap: copying before updating keeps the inputs intact while later keys win."""
CODE_COMMENTED = f"""{FENCE}python
def merge(base, override):
    \"\"\"Merge two settings dictionaries.

    Keys of ``override`` replace those of ``base``; neither argument is changed.
    \"\"\"
    merged = dict(base)  # a shallow copy, so the caller's dictionary stays as it was
    merged.update(override)  # later settings win over the defaults
    return merged  # the combined settings
{FENCE}

{FENCE}json
{{"retries": 3, "timeout_s": 30}}
{FENCE}
"""
MATH_SOURCE = ("A car travels 150 km in 2.5 hours. Its average speed is $v = \\frac{d}{t}$, so "
               "$v = \\frac{150}{2.5} = 60$ km/h. At that speed, a trip of 420 km takes 7 "
               "hours.")
MATH_SOLUTION = ("Step 1: The car covers a distance of 150 km in a time of 2.5 hours.\n"
                 "Step 2: Average speed is distance divided by time, $v = \\frac{d}{t}$.\n"
                 "Step 3: Substituting the values gives $$v = \\frac{150}{2.5} = 60$$ km/h.\n"
                 "Step 4: At 60 km/h, covering 420 km needs $420 / 60 = 7$ hours.\n"
                 "Final answer: the speed is 60 km/h, and 420 km take seven hours.")
MATH_TEXTBOOK = ("Average speed. The average speed of a moving object is defined as the "
                 "distance it covers divided by the time it needs, $v = \\frac{d}{t}$. "
                 "Worked example: a car that travels 150 km in 2.5 hours moves at "
                 "$v = \\frac{150}{2.5} = 60$ km/h on average. Conversely, at that speed a "
                 "journey of 420 km lasts 7 hours.")
MATH_CHANGED = ("Step 1: The car covers a distance of 150 km in a time of 3 hours.\n"
                "Step 2: Average speed is distance divided by time, $v = \\frac{d}{t}$.\n"
                "Step 3: Substituting the values gives $$v = \\frac{150}{3} = 50$$ km/h.\n"
                "Step 4: At 50 km/h, covering 420 km needs $420 / 50 = 8.4$ hours.\n"
                "Final answer: the speed is 50 km/h, and 420 km take 8.4 hours.")
WEB_SOURCE = ("The Eiffel Tower was completed in 1889 as the entrance arch of the World's "
              "Fair in Paris. It is 330 metres tall, weighs about 10,100 tonnes and was the "
              "tallest structure in the world for 41 years, until the Chrysler Building in "
              "New York overtook it in 1930. Around 7 million people visit it every year, "
              "which makes it one of the most visited paid monuments anywhere.")
DISTILL = ("Built in 1889 as the gateway to the Paris World's Fair, the Eiffel Tower stands "
           "330 metres high and weighs roughly 10,100 tonnes. It held the record of the "
           "world's tallest structure for 41 years, losing it in 1930 to New York's Chrysler "
           "Building, and draws about 7 million paying visitors a year.")
KNOWLEDGE_LIST = ("Key facts:\n"
                  "- The Eiffel Tower was finished in 1889 as the entrance to the Paris "
                  "World's Fair.\n"
                  "- Height: 330 metres; weight: about 10,100 tonnes.\n"
                  "- It was the tallest structure on Earth for 41 years, until 1930.\n"
                  "- The Chrysler Building in New York overtook it.\n"
                  "- Roughly 7 million people visit it each year.")
