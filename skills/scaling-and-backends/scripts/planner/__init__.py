"""The memory planner behind plan_training.py: model, hardware, memory, GPU split, lint, render."""
