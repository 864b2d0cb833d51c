"""Authorisation: ACLs and the authorizer consulted by the handlers."""
