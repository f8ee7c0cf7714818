"""CMP and Mahalanobis bundles (Feyisetan et al. 2020; Xu et al. 2020): noise, then a faiss nearest neighbour."""
