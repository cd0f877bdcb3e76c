//! A client built from the `redis` crate's `ConnectionInfo`, as an application that already
//! connects to Redis has it: the same server, user, password and database.

mod common;

use common::RedisServer;
use redis_lease::redis::IntoConnectionInfo;
use redis_lease::Client;

#[test]
fn a_client_from_connection_info_locks_as_its_user_in_its_database() {
    let server = RedisServer::start();
    let password = "p@ss:w/rd%";
    server.acl_setuser(
        "app+user@x",
        &["on", &format!(">{password}"), "~*", "&*", "+@all"],
    );
    let info = format!("redis://127.0.0.1:{}/3", server.port())
        .into_connection_info()
        .expect("a URL");
    let settings = info
        .redis_settings()
        .clone()
        .set_username("app+user@x")
        .set_password(password);
    let info = info.set_redis_settings(settings);
    let builder = Client::from_connection_info(&info).expect("a server the crate reaches");
    assert!(!format!("{builder:?}").contains(password), "{builder:?}");
    let client = builder.build().expect("valid settings");
    let guard = client
        .lock("from-info")
        .expect("valid")
        .lock()
        .expect("free");
    let mut con = server.connection();
    let in_db: Vec<bool> = [0, 3]
        .into_iter()
        .map(|db| {
            let () = redis::cmd("SELECT")
                .arg(db)
                .query(&mut con)
                .expect("SELECT");
            redis::cmd("EXISTS")
                .arg("{from-info}")
                .query(&mut con)
                .expect("EXISTS")
        })
        .collect();
    assert_eq!(in_db, [false, true], "the lock lives in database 3");
    guard.unlock().expect("held");
}

#[cfg(feature = "tls")]
#[test]
fn a_connection_info_without_certificate_checks_is_refused() {
    let insecure = "rediss://127.0.0.1:1/#insecure"
        .into_connection_info()
        .expect("a URL");
    assert!(matches!(
        Client::from_connection_info(&insecure),
        Err(redis_lease::Error::InvalidArgument(_))
    ));
}

#[test]
fn a_connection_info_for_an_ipv6_address_reaches_it() {
    let server = RedisServer::start_with(&["--bind", "127.0.0.1", "::1"]);
    let info = redis::ConnectionAddr::Tcp("::1".to_owned(), server.port())
        .into_connection_info()
        .expect("an address");
    let app = redis::Client::open(info).expect("a client of the application's");
    let client = Client::from_redis_client(&app)
        .expect("a server the crate reaches")
        .build()
        .expect("valid settings");
    let guard = client
        .lock("over-ipv6")
        .expect("valid")
        .lock()
        .expect("free");
    guard.unlock().expect("held");
}
