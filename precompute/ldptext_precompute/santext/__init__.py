"""SanText / SanText+ bundle building: embeddings, public frequencies, neighbour search, exact sampler tables."""
