//! The adapter's side of `mount --record`: names for the recorder, and
//! syncs with the reads their promises need (see [`crate::record`]).

use mqfs::{Attr, Ctx, Ino, SyncKind};

use super::{MqfsFuse, Served};
use crate::error::CliError;
use crate::record::names::kind_of;
use crate::record::{Read, Recorder, Req, Wanted};

impl<S: Served> MqfsFuse<S> {
    fn recorder(&mut self) -> Option<&mut Recorder> {
        self.mounted.as_mut().and_then(|m| m.rec.as_mut())
    }

    /// A reply tells the kernel that `parent/name` is `a` (`looked_up`:
    /// found, not made).
    pub(super) fn learned(&mut self, parent: Ino, name: &str, a: &Attr, looked_up: bool) {
        if let Some(rec) = self.recorder() {
            rec.learned(parent, name, a.ino, a.ftype, looked_up);
        }
    }

    /// Serves a sync request; when recording, reads what its promise is
    /// about once it returned, and the files the recorder has not noted
    /// since they were written (those reads' traffic comes after the
    /// promise's trace position, and changes nothing on the media).
    pub(super) fn sync(&mut self, ctx: Ctx, ino: Ino, kind: SyncKind) -> Result<(), i32> {
        self.call(ctx, Req::Sync(ino, kind), move |fs| async move {
            fs.sync(ctx, ino, kind).await
        })?;
        let Some(wanted) = self.recorder().and_then(|r| r.wanted()) else {
            return Ok(());
        };
        let read = match wanted {
            Wanted::File(i) => self.read_file(ctx, i).map(Read::File),
            Wanted::Dir(i) => self.run(ctx, Req::Query, move |fs| async move {
                let entries = fs.readdir(ctx, i).await?;
                Ok(Read::Dir(
                    entries
                        .into_iter()
                        .filter(|(n, _, _)| n != "." && n != "..")
                        .map(|(n, _, t)| (n, kind_of(t)))
                        .collect(),
                ))
            }),
        };
        match read {
            Ok(read) => {
                if let Some(rec) = self.recorder() {
                    rec.promise(read);
                }
            }
            // The sync itself worked: the program gets its answer, the run
            // only loses this promise.
            Err(e) => eprintln!(
                "mqfs: recording: cannot read inode {ino} after its sync: {}",
                e.one_line()
            ),
        }
        let unnoted = self.recorder().map(|r| r.unnoted()).unwrap_or_default();
        for i in unnoted {
            match self.read_file(ctx, i) {
                Ok(content) => {
                    if let Some(rec) = self.recorder() {
                        rec.note(i, &content);
                    }
                }
                Err(e) => eprintln!("mqfs: recording: cannot read inode {i}: {}", e.one_line()),
            }
        }
        Ok(())
    }

    /// The whole content of file `ino`.
    fn read_file(&mut self, ctx: Ctx, ino: Ino) -> Result<Vec<u8>, CliError> {
        self.run(ctx, Req::Query, move |fs| async move {
            let size = fs.getattr(ctx, ino).await?.size;
            fs.read(ctx, ino, 0, size as usize).await
        })
    }
}
