"""All I/O lives here: the Kubernetes API, the engines' HTTP endpoints. Everything else is pure."""
