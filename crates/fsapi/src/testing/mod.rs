//! The shared test machinery of the file systems (feature `testing`): a
//! machine with a formatted medium ([`Env`]), the workloads ([`Op`]), the
//! crash harness of the file systems on persistent memory ([`record`],
//! [`check`]), the reference model ([`agree_with_the_model`]) and the
//! POSIX behaviour checks ([`posix`]), which every file system runs.
//!
//! A file system's tests give an [`Adapter`] (its medium, mkfs, mount and
//! unmount) and call these generics; they keep only what is theirs (fault
//! switches, costs, layout). The medium is the adapter's choice
//! ([`Medium`]): persistent memory ([`Pmem`], what the crash harness
//! needs) for WOFS, PMFS and SoupFS, a machine with an NVMe drive for
//! MQFS. Being test support, this module panics when the simulated
//! machine itself fails (a setup error, not a finding).

mod crash;
mod model;
pub mod posix;
mod workload;

use std::future::Future;

use pcie_sim::{Executor, Machine, MachineProfile, PersistenceDomain, Pmem, PmemProfile, TraceMode};

use crate::{Ctx, FileSystem};

pub use crash::{
    check, must_fail, must_pass, record, recording_is_deterministic, Recording, Report, READ_SET_BUDGET,
};
pub use model::{agree_with_the_model, Model, Refused};
pub use workload::{churn, random_op, workload, Op, PATHS};

/// Persistent memory of the tests: 512 KiB.
pub const SIZE: u64 = 512 << 10;
/// The thread every test runs on.
pub const CTX: Ctx = Ctx { core: 0 };

/// The persistent memory of the tests, under ADR.
pub fn profile() -> PmemProfile {
    profile_in(PersistenceDomain::Adr)
}

/// The persistent memory of the tests, in `domain`.
pub fn profile_in(domain: PersistenceDomain) -> PmemProfile {
    PmemProfile {
        size: SIZE,
        domain,
        ..PmemProfile::default()
    }
}

/// The error of `A`'s file system.
pub type Error<A> = <<A as Adapter>::Fs as FileSystem>::Error;

/// What a file system lives on (persistent memory, a drive), with the
/// machine it is attached to: how the tests make one and what a power
/// failure leaves of it.
pub trait Medium: Clone + 'static {
    /// A fresh machine (its executor seeded with `seed`) with a fresh
    /// medium attached.
    fn machine(seed: u64) -> (Executor, Machine, Self);
    /// A power failure of `env`'s machine now: `env` becomes the machine
    /// that boots next (the same one, or a new one on a new executor)
    /// with what of the medium persisted.
    fn power_cycle<A: Adapter<Medium = Self>>(env: &mut Env<A>);
}

/// Persistent memory of [`SIZE`] under ADR on a default machine that
/// records its full trace; a power failure keeps its persistent image.
impl Medium for Pmem {
    fn machine(seed: u64) -> (Executor, Machine, Pmem) {
        let ex = Executor::new(seed);
        let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
        let pm = Pmem::attach(&m, profile()).expect("attach the persistent memory");
        (ex, m, pm)
    }

    fn power_cycle<A: Adapter<Medium = Self>>(env: &mut Env<A>) {
        let image = env.medium.persistent_image();
        env.medium = Pmem::attach_with_image(&env.m, profile(), image).expect("attach the persistent image");
    }
}

/// How the tests format and mount one file system.
#[allow(async_fn_in_trait)] // one single-threaded executor: no `Send` bound wanted
pub trait Adapter: 'static {
    /// The mounted file system.
    type Fs: FileSystem + 'static;
    /// What a mount takes (fault switches, options); the default is the
    /// correct file system.
    type Mount: Clone + Default + std::fmt::Debug + 'static;
    /// What the file system lives on.
    type Medium: Medium;
    /// Formats `medium` with the tests' geometry.
    async fn mkfs(m: &Machine, medium: &Self::Medium) -> Result<(), Error<Self>>;
    /// Mounts `medium` (recovery included).
    async fn mount(m: &Machine, medium: &Self::Medium, how: Self::Mount) -> Result<Self::Fs, Error<Self>>;
    /// Ends a mount before a remount: a clean unmount where the file
    /// system has one (what it cached goes to the medium); by default the
    /// mount is dropped (every call is durable at return).
    async fn unmount(fs: Self::Fs) -> Result<(), Error<Self>> {
        drop(fs);
        Ok(())
    }
    /// How the file system's space is used (what a remount must rebuild).
    type Usage: std::fmt::Debug + PartialEq + 'static;
    /// The usage now.
    async fn usage(fs: &Self::Fs) -> Self::Usage;
}

/// A machine with a formatted medium.
pub struct Env<A: Adapter> {
    /// The executor.
    pub ex: Executor,
    /// The machine.
    pub m: Machine,
    /// Its medium (persistent memory, a drive).
    pub medium: A::Medium,
}

impl<A: Adapter> std::fmt::Debug for Env<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Env").finish_non_exhaustive()
    }
}

impl<A: Adapter> Env<A> {
    /// A machine (executor seeded with `seed`) with a formatted medium.
    pub fn formatted(seed: u64) -> Env<A> {
        let (ex, m, medium) = A::Medium::machine(seed);
        let (m2, medium2) = (m.clone(), medium.clone());
        ex.block_on(async move { A::mkfs(&m2, &medium2).await })
            .expect("the executor runs mkfs")
            .expect("mkfs");
        Env { ex, m, medium }
    }

    /// Runs `program` on a fresh mount with `how`.
    pub fn run<T: 'static, F, Fut>(&self, how: impl Into<A::Mount>, program: F) -> Result<T, Error<A>>
    where
        F: FnOnce(A::Fs) -> Fut + 'static,
        Fut: Future<Output = Result<T, Error<A>>> + 'static,
    {
        let (m, medium, how) = (self.m.clone(), self.medium.clone(), how.into());
        self.ex
            .block_on(async move { program(A::mount(&m, &medium, how).await?).await })
            .expect("the executor runs the program")
    }

    /// A power failure now, in this run: the medium becomes what persisted
    /// of it ([`Medium::power_cycle`]; persistent memory: its persistent
    /// image, what this run's flushes and write-backs left).
    pub fn power_cycle(&mut self) {
        A::Medium::power_cycle(self);
    }
}

/// The persistent image of a formatted file system (seed 6) after six
/// files of 5000 bytes, a directory, a rename into it and an unlink: a
/// live image for the corruption tests.
pub fn live_image<A: Adapter<Medium = Pmem>>() -> pcie_sim::PageStore {
    let env = Env::<A>::formatted(6);
    env.run(A::Mount::default(), |fs| async move {
        for i in 0..6 {
            fs.create_path(CTX, &format!("/f{i}")).await?;
            fs.write_path(CTX, &format!("/f{i}"), 0, &[i as u8 + 1; 5000])
                .await?;
        }
        fs.mkdir_path(CTX, "/d").await?;
        fs.rename_path(CTX, "/f0", "/d/g").await?;
        fs.unlink_path(CTX, "/f1").await
    })
    .expect("the live workload runs");
    env.medium.persistent_image()
}
