"""`brainstream up`: the supervisor of the pipeline's processes, its console, its children's log
files and their lifeline."""
