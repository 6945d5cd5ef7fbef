"""Evaluators: evidence + hardware profile + versions lock -> one result per check id.

Pure functions. The same code judges a live node (`gpuprov validate`) and a saved
evidence directory (`gpuprov evaluate`), so a verdict is reproducible from its evidence.
"""
