"""A package so that pytest's prepend import mode puts the repository root on sys.path
(the first folder above tests/conftest.py without an __init__.py): ``tests.support``
then imports the same way in both halves of the suite, with no path edits. The test
folders below stay plain folders, so their modules keep their basenames."""
