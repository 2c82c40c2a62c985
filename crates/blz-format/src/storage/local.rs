//! The local (POSIX) backend: positional reads and writes on `std::fs::File`.

use super::{EntryKind, OpenMode, Storage, StorageFile};
use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Files on a locally mounted filesystem (a local disk, or a FUSE mount such as GlusterFS).
#[derive(Debug, Default, Clone, Copy)]
pub struct LocalStorage;

struct LocalFile {
    file: File,
    path: PathBuf,
}

impl StorageFile for LocalFile {
    fn len(&self) -> Result<u64> {
        Ok(self
            .file
            .metadata()
            .map_err(|e| Error::io("stat", &self.path, e))?
            .len())
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| Error::io("read", &self.path, e))
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.file
            .write_all_at(data, offset)
            .map_err(|e| Error::io("write", &self.path, e))
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.file
            .set_len(len)
            .map_err(|e| Error::io("truncate", &self.path, e))
    }

    fn sync(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| Error::io("sync", &self.path, e))
    }

    #[cfg(target_os = "linux")]
    fn start_sync(&self, offset: u64, len: u64) -> Result<()> {
        use std::os::fd::AsRawFd;
        let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
            return Ok(());
        };
        // SAFETY: the descriptor belongs to `self.file`, open for the whole call; the call
        // only queues writeback of the file's own pages.
        let rc = unsafe {
            libc::sync_file_range(
                self.file.as_raw_fd(),
                offset,
                len,
                libc::SYNC_FILE_RANGE_WRITE,
            )
        };
        // A hint: a filesystem that refuses it leaves the work to `sync`.
        let _ = rc;
        Ok(())
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

fn not_found_ok(r: std::io::Result<()>) -> std::io::Result<()> {
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// How long [`LocalStorage::lock`] tries again before it reports a lock as held. (250 ms
/// proved short: on a loaded two-core machine a child started by another thread of the
/// process kept a just-released lock longer, before its `exec`.)
const LOCK_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

impl Storage for LocalStorage {
    /// Files opened to write are never opened through a symbolic link (`O_NOFOLLOW`): a link
    /// planted where blz creates a file (a temporary file, a new superchunk file) is removed
    /// and a new file created in its place, exclusively; a link where blz writes to an
    /// existing file is an error naming it. Reads follow links.
    ///
    /// Only regular files are opened. Every open is non-blocking (`O_NONBLOCK`), so a FIFO
    /// (or a device) at the name never makes it wait for a peer, and what was opened is
    /// checked with `fstat`: anything but a regular file (a FIFO, a socket, a device, a
    /// directory) is an error naming the path, except where blz creates a file, where it is
    /// removed and the file made anew, as a link there is. (`O_NONBLOCK` changes nothing for
    /// a regular file.)
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Box<dyn StorageFile>> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut opts = OpenOptions::new();
        match mode {
            OpenMode::Read => opts.read(true).custom_flags(libc::O_NONBLOCK),
            OpenMode::ReadWrite => opts
                .read(true)
                .write(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK),
            OpenMode::Create => opts
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK),
        };
        let follow = mode == OpenMode::Read;
        let file = match opts.open(path) {
            Ok(f) => match regular(&f, path) {
                Ok(()) => f,
                Err(_) if mode == OpenMode::Create => create_anew(path)?,
                Err(e) => return Err(e),
            },
            Err(e) if mode == OpenMode::Create && (is_link(&e) || is_special(&e)) => {
                create_anew(path)?
            }
            Err(e) => return Err(explain("open", path, e, follow)),
        };
        Ok(Box::new(LocalFile {
            file,
            path: path.to_path_buf(),
        }))
    }

    fn is_symlink(&self, path: &Path) -> bool {
        std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
    }

    fn entry_kind(&self, path: &Path) -> Option<EntryKind> {
        std::fs::symlink_metadata(path)
            .ok()
            .map(|m| kind_of(m.file_type()))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))? {
            let entry = entry.map_err(|e| Error::io("list", dir, e))?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|e| Error::io("rename", from, e))
    }

    #[cfg(target_os = "linux")]
    fn exchange(&self, a: &Path, b: &Path) -> Result<()> {
        use std::os::unix::ffi::OsStrExt;
        let c = |p: &Path| {
            std::ffi::CString::new(p.as_os_str().as_bytes())
                .map_err(|_| Error::InvalidArgument(format!("{} holds a NUL byte", p.display())))
        };
        let (ca, cb) = (c(a)?, c(b)?);
        // SAFETY: both are NUL-terminated paths that outlive the call; AT_FDCWD resolves
        // them as relative to the working directory, as std's rename does.
        let rc = unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                ca.as_ptr(),
                libc::AT_FDCWD,
                cb.as_ptr(),
                libc::RENAME_EXCHANGE,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP) => Err(Error::Unsupported {
                path: a.to_path_buf(),
                reason: format!("the filesystem cannot swap two paths atomically ({e})"),
            }),
            _ => Err(Error::io("exchange", a, e)),
        }
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        not_found_ok(std::fs::remove_file(path)).map_err(|e| Error::io("remove", path, e))
    }

    /// A link at `path` is removed itself, never followed (nor is any link below it: std's
    /// `remove_dir_all` removes links without following them); so is a file there.
    fn remove_dir_all(&self, path: &Path) -> Result<()> {
        let r = match std::fs::symlink_metadata(path) {
            Ok(m) if !m.file_type().is_dir() => std::fs::remove_file(path),
            _ => std::fs::remove_dir_all(path),
        };
        not_found_ok(r).map_err(|e| Error::io("remove", path, e))
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        std::fs::create_dir_all(path).map_err(|e| Error::io("mkdir", path, e))
    }

    fn create_dir_new(&self, path: &Path) -> Result<()> {
        std::fs::create_dir(path).map_err(|e| Error::io("mkdir", path, e))
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }

    #[cfg(unix)]
    fn stamp(&self, path: &Path) -> Option<[u64; 4]> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::symlink_metadata(path).ok()?;
        let mtime = (m.mtime() as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(m.mtime_nsec() as u64);
        Some([m.dev(), m.ino(), mtime, m.len()])
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io("sync", dir, e))
    }

    /// flock(2) through `File::try_lock` on the lock file, opened with `O_NOFOLLOW` and
    /// `O_NONBLOCK` (a link or a FIFO there is an error naming it, never followed or waited
    /// on); the lock goes with the open file, so the guard (the file) releases it when
    /// dropped. Once taken, the lock is checked to be on the file that is at `path` now: a
    /// lock file that was renamed away meanwhile (its directory published or swapped by
    /// another writer) guards another path, so it is let go and `path` opened again.
    ///
    /// A refusal is tried again for up to [`LOCK_RETRY`]: a child process that any thread
    /// of this process starts gets a copy of every open descriptor until its `exec` closes
    /// them, so a lock released just then stays held by the child for a moment, and a
    /// writer that closes a dataset and opens it again would be told it is locked. A lock
    /// really held by another writer is reported after that wait.
    fn lock(&self, path: &Path) -> Result<super::LockGuard> {
        use std::os::unix::fs::OpenOptionsExt;
        let start = std::time::Instant::now();
        let mut pause = std::time::Duration::from_millis(1);
        loop {
            let file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
                .open(path)
                .map_err(|e| explain("open", path, e, false))?;
            regular(&file, path)?;
            let held = match file.try_lock() {
                Ok(()) => {
                    if same_file(&file, path)? {
                        write_holder(&file);
                        return Ok(Box::new(file));
                    }
                    // Moved away since it was opened: not the lock of `path` any more.
                    false
                }
                Err(std::fs::TryLockError::WouldBlock) => true,
                Err(std::fs::TryLockError::Error(e)) => return Err(Error::io("lock", path, e)),
            };
            drop(file);
            if start.elapsed() >= LOCK_RETRY {
                return Err(Error::Locked {
                    path: path.to_path_buf(),
                    holder: if held { read_holder(path) } else { None },
                });
            }
            if held {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(50));
            }
        }
    }
}

/// Records this process as the holder of the lock on `file` (just taken): its process id in
/// decimal ASCII and a newline, the whole content of the file (`spec/dataset.md`, `meta/lock`),
/// for a refused writer to name it. Best effort: a lock file that cannot be written is still
/// a lock.
fn write_holder(file: &File) {
    let text = format!("{}\n", std::process::id());
    if file.set_len(0).is_ok() {
        let _ = file.write_all_at(text.as_bytes(), 0);
    }
}

/// The process id the holder of the lock at `path` wrote into it ([`write_holder`]), when
/// it is there and well formed (a holder that has not written it yet, or an older blz that
/// writes nothing, leaves it unknown).
fn read_holder(path: &Path) -> Option<u32> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let mut text = String::new();
    file.take(32).read_to_string(&mut text).ok()?;
    text.strip_suffix('\n')?.parse().ok().filter(|&pid| pid > 0)
}

/// What the entry at `path` is, by its `lstat` file type.
fn kind_of(t: std::fs::FileType) -> EntryKind {
    use std::os::unix::fs::FileTypeExt;
    if t.is_symlink() {
        EntryKind::Symlink
    } else if t.is_dir() {
        EntryKind::Dir
    } else if t.is_file() {
        EntryKind::File
    } else if t.is_fifo() {
        EntryKind::Other("a FIFO")
    } else if t.is_socket() {
        EntryKind::Other("a socket")
    } else if t.is_char_device() {
        EntryKind::Other("a character device")
    } else if t.is_block_device() {
        EntryKind::Other("a block device")
    } else {
        EntryKind::Other("an unknown kind of file")
    }
}

/// The error for an entry that is not a regular file where blz opens one.
fn not_regular(op: &'static str, path: &Path, kind: EntryKind) -> Error {
    Error::io(
        op,
        path,
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{kind}, not a regular file: blz opens only regular files"),
        ),
    )
}

/// Refuses an open file that is not a regular file (checked on the descriptor, so the
/// answer is about the file opened, not whatever is at `path` a moment later).
fn regular(file: &File, path: &Path) -> Result<()> {
    let t = file
        .metadata()
        .map_err(|e| Error::io("stat", path, e))?
        .file_type();
    if t.is_file() {
        Ok(())
    } else {
        Err(not_regular("open", path, kind_of(t)))
    }
}

/// True when the open failed on a symbolic link at the name (`O_NOFOLLOW`).
fn is_link(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(libc::ELOOP)
}

/// True when the open failed on a special file: a socket (which `open` refuses), or a FIFO
/// opened to write only, without a reader.
fn is_special(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENXIO | libc::ENODEV))
}

/// The error for an open of `path` that failed with `e`: a link where blz does not follow
/// one (`follow` false), or something that is not a regular file, is said as such.
fn explain(op: &'static str, path: &Path, e: std::io::Error, follow: bool) -> Error {
    if is_link(&e) && !follow {
        return Error::io(
            op,
            path,
            std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                "a symbolic link: blz does not write through links",
            ),
        );
    }
    let meta = if follow {
        std::fs::metadata(path)
    } else {
        std::fs::symlink_metadata(path)
    };
    match meta.map(|m| kind_of(m.file_type())) {
        Ok(kind @ (EntryKind::Dir | EntryKind::Other(_))) => not_regular(op, path, kind),
        _ => Error::io(op, path, e),
    }
}

/// Removes what is at `path` (a link, a FIFO, a socket: never what a link points to) and
/// creates a regular file there, exclusively and without following a link.
fn create_anew(path: &Path) -> Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::remove_file(path).map_err(|e| Error::io("remove", path, e))?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| explain("create", path, e, false))?;
    regular(&file, path)?;
    Ok(file)
}

/// True when `file` is the file at `path` now (same device and inode, `path` not followed
/// if it is a link); false when `path` is gone or names another file.
fn same_file(file: &File, path: &Path) -> Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let open = file.metadata().map_err(|e| Error::io("stat", path, e))?;
    match std::fs::symlink_metadata(path) {
        Ok(now) => Ok(now.dev() == open.dev() && now.ino() == open.ino()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io("stat", path, e)),
    }
}
