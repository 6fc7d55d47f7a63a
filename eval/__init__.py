"""Fidelity evaluation against the human gold of the shared corpus: `python -m eval.fidelity`."""
