"""CusText / CusText+ bundles (Chen et al. 2023): output sets and exact engine tables."""
