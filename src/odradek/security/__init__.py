"""Listeners' security: TLS (:mod:`.tls`), SASL (:mod:`.sasl`, :mod:`.scram`)."""
