"""`aisctl`: the command line for people and for the pod entry points (render, plan, crd, operator, sim)."""
