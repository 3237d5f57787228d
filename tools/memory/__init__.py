"""Memory measurement on a GPU and its comparison with the planner (tools/measure_memory.py is the command).

record  the record's schema and its check (pure Python)
suite   the runs to measure, as specs, and the planner flags that describe each (pure Python)
compare planned against measured, per run (pure Python; the planner is passed in)
measure the steps themselves (torch, transformers, peft, trl, datasets and bitsandbytes imported there only)
"""
