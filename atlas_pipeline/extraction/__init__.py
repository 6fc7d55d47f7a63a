"""Template-driven extraction: templates and rules as data, and the extractors that apply them."""
