"""Tools that are never deployed: the command line, the offline plan engine, render, stack selection, image delivery."""
