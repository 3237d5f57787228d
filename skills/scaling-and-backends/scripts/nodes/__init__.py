"""compare_nodes.py: load the reports, read facts per node, group and judge the differences, render."""
