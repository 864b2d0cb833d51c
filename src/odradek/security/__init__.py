"""Security: listeners' TLS (:mod:`.tls`, :mod:`.listeners`), SASL authentication (:mod:`.sasl`,
:mod:`.scram`), and authorisation: ACLs and the authorizer consulted by the handlers (:mod:`.acl`,
:mod:`.authorizer`)."""
