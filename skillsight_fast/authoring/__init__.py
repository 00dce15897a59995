"""Tools for skill authors: the library doctor, trigger evals, the analysis report."""
