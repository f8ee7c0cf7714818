"""Shared pieces of the comparison mechanisms (TEM, CusText(+), CMP, Mahalanobis): engine tables for
exponential mechanisms, faiss neighbour search, the bundle steps they have in common."""
