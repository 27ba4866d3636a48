//! The program (or image) that gmon files and DCPI profiles need: their
//! addresses mean nothing without its symbols.

use std::path::{Path, PathBuf};

use tally_symbols::ObjectFile;

use crate::Error;

/// An object file opened once, with the path it was named by.
pub struct Program {
    object: ObjectFile,
    path: PathBuf,
}

impl Program {
    /// Opens `path` as an object file; the error names the file and why.
    pub fn open(path: &Path) -> Result<Program, Error> {
        // The symbols error names the file and its cause already; its
        // source would repeat it.
        let object = ObjectFile::open(path).map_err(|e| Error::Input(e.to_string()))?;
        Ok(Program {
            object,
            path: path.to_path_buf(),
        })
    }

    /// The object file.
    pub fn object(&self) -> &ObjectFile {
        &self.object
    }

    /// The path it was named by.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
