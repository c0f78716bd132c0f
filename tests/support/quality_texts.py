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
