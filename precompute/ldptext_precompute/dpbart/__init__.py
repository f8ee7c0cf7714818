"""DP-BART bundle building: public model and corpus, training stages, pruning, ONNX export, int8, checks."""
