"""The reconcile loop: pure planning and status over observed pods, driven by thin kopf handlers.

`views` reads Kubernetes objects into small typed views, `plan` decides the next actions, `status`
computes the status and its conditions, `reconcile` runs the ordered steps with a client, and `handlers`
wires it to kopf. Only `reconcile` and `handlers` touch I/O, through `ascend_operator.clients`.
"""
