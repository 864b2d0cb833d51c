"""How this broker connects to the others of its cluster: the security of the listener named by
``inter.broker.listener.name``, as a client.

Kafka's rules: over TLS the broker trusts its listener's ``ssl.truststore.location`` and shows its
own key store (so mutual TLS between brokers works), checking the other broker's host name unless
``ssl.endpoint.identification.algorithm`` is empty; over SASL it uses
``sasl.mechanism.inter.broker.protocol`` (unset here: the listener's first enabled mechanism) with
the ``username`` and ``password`` options of the listener's JAAS entry for that mechanism
(``listener.name.<l>.<mechanism>.sasl.jaas.config``, else ``sasl.jaas.config``); for
OAUTHBEARER, that entry's ``clientId``, ``clientSecret`` and ``scope`` against
``sasl.oauthbearer.token.endpoint.url`` (or its ``unsecuredLoginStringClaim_sub`` without one).
Read once at start; nothing on disk.
"""

from __future__ import annotations

from odradek.config import BrokerConfig, ConfigError
from odradek.security.client_settings import ClientSecurity, ClientSettingsError
from odradek.security.sasl import parse_jaas


def inter_broker_security(config: BrokerConfig) -> ClientSecurity | None:
    """The client security of the inter-broker listener; None for PLAINTEXT."""
    name = config.inter_broker_listener()
    spec = next(s for s in config.listener_specs() if s.name == name)
    if spec.protocol == "PLAINTEXT":
        return None

    def setting(key: str) -> str | None:
        return config.listener_setting(name, key)

    client: dict[str, str] = {"security.protocol": spec.protocol}
    for key in ("ssl.truststore.location", "ssl.keystore.location", "ssl.key.password"):
        value = setting(key)
        if value:
            client[key] = value
    client["ssl.endpoint.identification.algorithm"] = (
        setting("ssl.endpoint.identification.algorithm") or "https"
    )
    if spec.uses_sasl:
        enabled = [m.strip().upper() for m in (setting("sasl.enabled.mechanisms") or "").split(",")]
        mechanism = (
            config.raw("sasl.mechanism.inter.broker.protocol") or (enabled[0] if enabled else "")
        ).upper()
        jaas = config.props.get(
            f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config"
        ) or setting("sasl.jaas.config")
        options = parse_jaas(jaas)[1] if jaas else {}
        if mechanism == "OAUTHBEARER":
            # The login module's clientId, clientSecret and scope (or an unsecured subject),
            # with the token endpoint of the broker's settings (KIP-768).
            client |= {"sasl.mechanism": mechanism, "sasl.jaas.config": jaas or ""}
            endpoint = setting("sasl.oauthbearer.token.endpoint.url")
            if endpoint:
                client["sasl.oauthbearer.token.endpoint.url"] = endpoint
            try:
                return ClientSecurity.from_config(client)
            except ClientSettingsError as e:
                raise ConfigError(f"inter-broker listener {name} uses OAUTHBEARER: {e}") from None
        if "username" not in options or "password" not in options:
            raise ConfigError(
                f"inter-broker listener {name} uses SASL {mechanism}: its JAAS entry needs "
                'username="..." password="..." for this broker to log in to the others'
            )
        client |= {
            "sasl.mechanism": mechanism,
            "sasl.username": options["username"],
            "sasl.password": options["password"],
        }
    return ClientSecurity.from_config(client)
