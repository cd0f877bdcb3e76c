//! Every store refuses at build the settings it cannot honour, naming the setting, rather than
//! ignore them: a password, TLS, replica acknowledgements, a pool or pipelining on ZooKeeper;
//! ZooKeeper's authentication on any Redis deployment; pipelining where calls cannot share a
//! connection. None of these builds reaches a server.

use redis_lease::{Client, ClientBuilder, Error};

/// A Redis address nobody listens on: the refusals come before any connection.
const NOWHERE: &str = "redis://127.0.0.1:1";

fn refused(builder: ClientBuilder, setting: &str) {
    refused_on(builder, setting, "");
}

/// As [`refused`], on the deployment `on` (for the failure's message).
fn refused_on(builder: ClientBuilder, setting: &str, on: &str) {
    match builder.build() {
        Err(Error::InvalidArgument(why)) => {
            assert!(why.contains(setting), "{setting} {on}: {why}");
        }
        Err(other) => panic!("{setting} {on}: refused with {other:?}, not as an invalid argument"),
        Ok(_) => panic!("{setting} {on} was taken, though it cannot be honoured"),
    }
}

/// Each Redis deployment, by its builder.
#[cfg(feature = "zookeeper")]
fn redis_deployments() -> Vec<(&'static str, ClientBuilder)> {
    vec![
        ("one server", Client::builder(NOWHERE)),
        ("cluster", Client::cluster([NOWHERE])),
        ("sentinel", Client::sentinel("mymaster", [NOWHERE])),
        (
            "redlock",
            Client::redlock([NOWHERE, "redis://127.0.0.1:2", "redis://127.0.0.1:3"]),
        ),
    ]
}

#[cfg(feature = "zookeeper")]
#[test]
fn every_redis_deployment_refuses_a_cap_of_no_connection() {
    for (deployment, builder) in redis_deployments() {
        refused_on(builder.max_connections(0), "max_connections", deployment);
    }
}

#[cfg(feature = "zookeeper")]
#[test]
fn every_redis_deployment_refuses_zookeeper_authentication() {
    for (deployment, builder) in redis_deployments() {
        let builder = builder.zookeeper_auth("locker", "s3cret");
        refused_on(builder, "zookeeper_auth", deployment);
    }
}

#[test]
fn redlock_refuses_pipelining_it_cannot_do_and_takes_it_off() {
    let masters = [NOWHERE, "redis://127.0.0.1:2", "redis://127.0.0.1:3"];
    refused(Client::redlock(masters).pipelining(true), "pipelining");
    Client::redlock(masters)
        .pipelining(false)
        .build()
        .expect("pipelining off is what RedLock does anyway");
}

#[cfg(feature = "tls")]
#[test]
fn tls_refuses_pipelining_it_cannot_do_and_takes_it_off() {
    refused(
        Client::builder("rediss://127.0.0.1:1").pipelining(true),
        "pipelining",
    );
    Client::builder("rediss://127.0.0.1:1")
        .pipelining(false)
        .build()
        .expect("pipelining off is what TLS does anyway");
}

#[cfg(feature = "zookeeper")]
mod zookeeper {
    use super::*;
    use std::time::Duration;

    fn ensemble() -> ClientBuilder {
        Client::zookeeper(["127.0.0.1:1"])
    }

    #[test]
    fn zookeeper_refuses_every_redis_setting() {
        let pem = "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n";
        let settings: Vec<(&str, ClientBuilder)> = vec![
            ("password", ensemble().password("s3cret")),
            (
                "tls_ca_file",
                ensemble().tls_ca_file("/etc/ssl/certs/ca.pem"),
            ),
            ("tls_ca_pem", ensemble().tls_ca_pem(pem)),
            (
                "tls_client_cert",
                ensemble().tls_client_cert("/tmp/cert.pem", "/tmp/key.pem"),
            ),
            (
                "tls_client_cert_pem",
                ensemble().tls_client_cert_pem(pem, pem),
            ),
            (
                "replica_acks",
                ensemble().replica_acks(1, Duration::from_millis(100)),
            ),
            ("pool_size", ensemble().pool_size(4)),
            ("max_connections", ensemble().max_connections(4)),
            ("pipelining", ensemble().pipelining(false)),
            ("quorum", ensemble().quorum(2)),
            (
                "retry_delay",
                ensemble().retry_delay(Duration::from_millis(5)),
            ),
        ];
        for (setting, builder) in settings {
            refused(builder, setting);
        }
    }

    #[test]
    fn zookeeper_takes_what_it_honours() {
        let client = ensemble()
            .zookeeper_auth("locker", "s3cret")
            .default_lease(Duration::from_secs(4))
            .connect_timeout(Duration::from_millis(500))
            .command_timeout(Duration::from_millis(500))
            .key_prefix("app/")
            .max_local_waiters(8)
            .renewal_batch(10)
            .name("settings-test")
            .build();
        assert!(client.is_ok(), "{client:?}");
    }
}
