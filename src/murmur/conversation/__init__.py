"""Conversations: the durable record of a context's messages (spec/conversations.md).

:mod:`murmur.conversation.record` keeps the files; :mod:`murmur.conversation.resume` finds
the context a ``mur run --resume`` continues.
"""
