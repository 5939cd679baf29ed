"""``xla-bugkit bisect``: replay a bundle's module under other jaxlib releases, to say
whether the failure still happens on the newest and which release brought (or fixed) it."""
