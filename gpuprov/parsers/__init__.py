"""Parsers: the text real tools print, turned into data. Pure functions, no I/O.

Every parser takes the text and the name of the file it came from, and raises
ParseError naming that file when the text is not what the tool prints (truncated,
empty where output is required, another tool's output).
"""
