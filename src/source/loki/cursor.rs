//! The Loki cursor file of the first state format (`loki-cursor.json`):
//! where each query stopped. `run` now keeps the cursors inside its
//! checkpoint, beside the detection state they belong with, and reads this
//! file only to take over the state of an older version.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The checkpoint file in a state directory.
pub fn path(state_dir: &Path) -> PathBuf {
    state_dir.join("loki-cursor.json")
}

/// Reads the saved cursors (query → ns). A missing file is an empty map; a
/// corrupt one is an error (starting over silently could skip or repeat).
pub fn load(state_dir: &Path) -> Result<BTreeMap<String, i64>, String> {
    let p = path(state_dir);
    match std::fs::read_to_string(&p) {
        Ok(t) => serde_json::from_str(&t).map_err(|e| format!("{}: {e}", p.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
        Err(e) => Err(format!("{}: {e}", p.display())),
    }
}

/// Saves the cursors atomically (the first state format; `run` keeps
/// them in its checkpoint now).
pub fn save(state_dir: &Path, cursors: &BTreeMap<String, i64>) -> Result<(), String> {
    let body = serde_json::to_vec_pretty(cursors).map_err(|e| e.to_string())?;
    crate::durable::write_atomic(&path(state_dir), &body).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let d = tempfile::tempdir().unwrap();
        assert!(load(d.path()).unwrap().is_empty());
        let mut m = BTreeMap::new();
        m.insert(
            "{namespace=\"livekit\"}".to_string(),
            1_795_966_511_450_076_838,
        );
        save(d.path(), &m).unwrap();
        assert_eq!(load(d.path()).unwrap(), m);
        std::fs::write(path(d.path()), "{not json").unwrap();
        assert!(load(d.path()).is_err());
    }
}
