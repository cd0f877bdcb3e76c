//! The scenarios on one PostgreSQL server: the clients' calls straight to it, or through
//! PgBouncer in transaction mode with fewer server connections than the clients open.

use crate::fault::Fault;
use crate::mode::Mode;
use crate::primitive::Primitive;
use crate::scenario::Scenario;
use testkit::Shutdown;

/// The calls straight to the server.
pub(super) const PG: Mode = Mode::Postgres { pooled: false };
/// The calls through PgBouncer in transaction mode.
pub(super) const PG_POOLED: Mode = Mode::Postgres { pooled: true };

/// The PostgreSQL scenarios of the default profile, those of the short one marked.
pub(super) fn scenarios() -> Vec<Scenario> {
    use Fault::*;
    let scenario = |name, inside, mode, fault, short| Scenario {
        name,
        inside,
        mode,
        fault,
        short,
        primitive: Primitive::Lock,
    };
    let short = |name, inside, mode, fault| scenario(name, inside, mode, fault, true);
    vec![
        // Holds are rows whose expiry the database's clock sets and judges, tokens a counter
        // row committed synchronously, waiting by LISTEN/NOTIFY.
        short("postgres: contention baseline", true, PG, None),
        short(
            "postgres: the server frozen (SIGSTOP) past the lease",
            true,
            PG,
            FreezeServer(2),
        ),
        short(
            "postgres: the server restarted by a fast shutdown",
            true,
            PG,
            RestartServer(Shutdown::Fast),
        ),
        short(
            "postgres: the server restarted by an immediate shutdown (the WAL replayed)",
            true,
            PG,
            RestartServer(Shutdown::Immediate),
        ),
        short(
            "postgres: the calls partitioned from the server for 2 leases (proxy)",
            true,
            PG,
            Partition(2),
        ),
        short(
            "postgres: the listening connections partitioned for 2 leases (proxy)",
            true,
            PG,
            PartitionListener(2),
        ),
        short(
            "postgres: a client killed while it waits, and started again",
            true,
            PG,
            KillWaiter,
        ),
        short(
            "postgres: holder frozen (SIGSTOP) past its lease",
            false,
            PG,
            FreezeHolder(3),
        ),
        // Through PgBouncer in transaction mode, with fewer server connections than the clients
        // open: any call may run on any server connection.
        short(
            "postgres through PgBouncer (transaction mode): contention baseline",
            true,
            PG_POOLED,
            None,
        ),
        scenario(
            "postgres through PgBouncer (transaction mode): the server frozen (SIGSTOP) past the lease",
            true,
            PG_POOLED,
            FreezeServer(2),
            false,
        ),
        scenario(
            "postgres through PgBouncer (transaction mode): a client killed while it waits, and started again",
            true,
            PG_POOLED,
            KillWaiter,
            false,
        ),
        scenario(
            "postgres through PgBouncer (transaction mode): holder frozen (SIGSTOP) past its lease",
            false,
            PG_POOLED,
            FreezeHolder(3),
            false,
        ),
    ]
}
