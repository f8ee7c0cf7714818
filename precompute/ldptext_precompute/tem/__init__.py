"""TEM bundles (Carvalho et al. 2021): the truncated exponential mechanism on the exact engine."""
