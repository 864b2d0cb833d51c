"""Client quotas (KIP-13, KIP-55, KIP-124, KIP-546): who they apply to, and how they are held."""
