"""neurondesk: a terminal console for PyTorch training on AWS Trainium."""
