"""The install planner behind plan_install.py: the recorded stack matrix, the typed request, resolve, judge, render."""
