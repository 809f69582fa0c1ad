//! The shared test machinery of the file systems on persistent memory
//! (feature `testing`): a machine with formatted persistent memory
//! ([`Env`]), the workloads ([`Op`]), the crash harness ([`record`],
//! [`check`]), the reference model ([`agree_with_the_model`]) and the
//! POSIX behaviour checks ([`posix`]).
//!
//! A file system's tests give an [`Adapter`] (its mkfs and mount) and call
//! these generics; they keep only what is theirs (fault switches, costs,
//! layout). Being test support, this module panics when the simulated
//! machine itself fails (a setup error, not a finding).

mod crash;
mod model;
pub mod posix;
mod workload;

use std::future::Future;

use pcie_sim::{Executor, Machine, MachineProfile, PersistenceDomain, Pmem, PmemProfile, TraceMode};

use crate::{Ctx, FileSystem};

pub use crash::{
    bound_from_env, check, must_fail, must_pass, record, recording_is_deterministic, Recording, Report,
    BOUND, CANARY_BOUND,
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

/// How the tests format and mount one file system.
#[allow(async_fn_in_trait)] // one single-threaded executor: no `Send` bound wanted
pub trait Adapter: 'static {
    /// The mounted file system.
    type Fs: FileSystem + 'static;
    /// What a mount takes (fault switches, options); the default is the
    /// correct file system.
    type Mount: Clone + Default + std::fmt::Debug + 'static;
    /// Formats `pm` with the tests' geometry.
    async fn mkfs(m: &Machine, pm: &Pmem) -> Result<(), Error<Self>>;
    /// Mounts `pm` (recovery included).
    async fn mount(m: &Machine, pm: &Pmem, how: Self::Mount) -> Result<Self::Fs, Error<Self>>;
    /// How the file system's space is used (what a remount must rebuild).
    type Usage: std::fmt::Debug + PartialEq + 'static;
    /// The usage now.
    fn usage(fs: &Self::Fs) -> Self::Usage;
    /// Free data pages now.
    fn free_pages(fs: &Self::Fs) -> u64;
}

/// A machine with formatted persistent memory.
pub struct Env<A> {
    /// The executor.
    pub ex: Executor,
    /// The machine.
    pub m: Machine,
    /// Its persistent memory.
    pub pm: Pmem,
    _fs: std::marker::PhantomData<A>,
}

impl<A> std::fmt::Debug for Env<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Env").field("pm", &self.pm.size()).finish()
    }
}

impl<A: Adapter> Env<A> {
    /// A machine (executor seeded with `seed`) with formatted persistent
    /// memory.
    pub fn formatted(seed: u64) -> Env<A> {
        let ex = Executor::new(seed);
        let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
        let pm = Pmem::attach(&m, profile()).expect("attach the persistent memory");
        let (m2, pm2) = (m.clone(), pm.clone());
        ex.block_on(async move { A::mkfs(&m2, &pm2).await })
            .expect("the executor runs mkfs")
            .expect("mkfs");
        Env {
            ex,
            m,
            pm,
            _fs: std::marker::PhantomData,
        }
    }

    /// Runs `program` on a fresh mount with `how`.
    pub fn run<T: 'static, F, Fut>(&self, how: impl Into<A::Mount>, program: F) -> Result<T, Error<A>>
    where
        F: FnOnce(A::Fs) -> Fut + 'static,
        Fut: Future<Output = Result<T, Error<A>>> + 'static,
    {
        let (m, pm, how) = (self.m.clone(), self.pm.clone(), how.into());
        self.ex
            .block_on(async move { program(A::mount(&m, &pm, how).await?).await })
            .expect("the executor runs the program")
    }

    /// A power failure now, in this run: the persistent memory becomes its
    /// persistent image (what this run's flushes and write-backs left).
    pub fn power_cycle(&mut self) {
        let image = self.pm.persistent_image();
        self.pm = Pmem::attach_with_image(&self.m, profile(), image).expect("attach the persistent image");
    }
}

/// The persistent image of a formatted file system (seed 6) after six
/// files of 5000 bytes, a directory, a rename into it and an unlink: a
/// live image for the corruption tests.
pub fn live_image<A: Adapter>() -> pcie_sim::PageStore {
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
    env.pm.persistent_image()
}
