# A package only so that pytest can tell this test_rank.py from examples/ray/test_rank.py
# when both directories are collected in one run.
