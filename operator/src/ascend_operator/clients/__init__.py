"""The operator's I/O: the Kubernetes API (with its watch caches) and the engines' HTTP endpoints.

Below the controller and above the pure packages (.importlinter): clients take rendered objects and
return what they read, and import no render themselves, so only the controller joins rendering with I/O.
"""
