//! Compiles `proto/pulsar.proto` with protox (pure Rust, no `protoc`) and
//! prost-build, and writes a table of each message's required and
//! message-typed fields. prost cannot tell a missing proto2 `required`
//! scalar from a zero, so the crate checks presence on the wire with it.

use std::collections::HashMap;
use std::error::Error;
use std::fmt::Write as _;
use std::path::PathBuf;

// descriptor.proto constants (FieldDescriptorProto.Label / .Type).
const LABEL_REQUIRED: i32 = 2;
const TYPE_MESSAGE: i32 = 11;
const TYPE_GROUP: i32 = 10;

fn main() -> Result<(), Box<dyn Error>> {
    println!("cargo:rerun-if-changed=proto/pulsar.proto");
    println!("cargo:rerun-if-changed=build.rs");

    let fds = protox::compile(["pulsar.proto"], ["proto"])?;

    // Copy what the table needs out of prost-types' descriptors (field
    // access only, so prost-types need not be a build-dependency).
    let mut messages = Vec::new();
    for file in &fds.file {
        let package = file.package.clone().unwrap_or_default();
        for message in &file.message_type {
            if !message.nested_type.is_empty() {
                return Err("nested message types are not supported by the schema table".into());
            }
            messages.push(Message {
                full_name: format!(".{package}.{}", message.name.clone().unwrap_or_default()),
                name: message.name.clone().unwrap_or_default(),
                fields: message
                    .field
                    .iter()
                    .map(|f| Field {
                        number: f.number.unwrap_or_default(),
                        name: f.name.clone().unwrap_or_default(),
                        label: f.label.unwrap_or_default(),
                        kind: f.r#type.unwrap_or_default(),
                        type_name: f.type_name.clone().unwrap_or_default(),
                    })
                    .collect(),
            });
        }
    }

    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("pulsar_schema.rs"), schema_table(&messages)?)?;

    prost_build::Config::new()
        // `bytes` fields become `bytes::Bytes`, sliced from the frame
        // rather than copied when decoding from a `Bytes` buffer.
        .bytes(["."])
        .compile_fds(fds)?;
    Ok(())
}

struct Message {
    full_name: String,
    name: String,
    fields: Vec<Field>,
}

struct Field {
    number: i32,
    name: String,
    label: i32,
    kind: i32,
    type_name: String,
}

/// Rust source for `MESSAGES` (one entry per message, fields sorted by
/// number, only required or message-typed fields) and an index constant per
/// message, e.g. `MESSAGE_ID_DATA`.
fn schema_table(messages: &[Message]) -> Result<String, Box<dyn Error>> {
    let index: HashMap<&str, usize> = messages
        .iter()
        .enumerate()
        .map(|(i, m)| (m.full_name.as_str(), i))
        .collect();

    let mut src = String::from("pub(crate) static MESSAGES: &[MessageSchema] = &[\n");
    for message in messages {
        let name = &message.name;
        let mut fields: Vec<_> = message
            .fields
            .iter()
            .filter(|f| f.label == LABEL_REQUIRED || f.kind == TYPE_MESSAGE || f.kind == TYPE_GROUP)
            .collect();
        fields.sort_by_key(|f| f.number);
        if fields.len() > 64 {
            return Err(format!("{name} has more than 64 tracked fields").into());
        }
        writeln!(src, "    MessageSchema {{ name: {name:?}, fields: &[")?;
        for f in fields {
            if f.kind == TYPE_GROUP {
                return Err(format!("{name}: groups are not supported").into());
            }
            let nested = if f.kind == TYPE_MESSAGE {
                let i = index
                    .get(f.type_name.as_str())
                    .ok_or_else(|| format!("unknown message type {}", f.type_name))?;
                format!("Some({i})")
            } else {
                "None".to_string()
            };
            writeln!(
                src,
                "        FieldSchema {{ number: {}, name: {:?}, required: {}, message: {nested} }},",
                f.number,
                f.name,
                f.label == LABEL_REQUIRED,
            )?;
        }
        writeln!(src, "    ] }},")?;
    }
    src.push_str("];\n");
    for (i, message) in messages.iter().enumerate() {
        writeln!(
            src,
            "#[allow(dead_code)]\npub(crate) const {}: usize = {i};",
            screaming_snake(&message.name)
        )?;
    }
    Ok(src)
}

/// `MessageIdData` → `MESSAGE_ID_DATA`.
fn screaming_snake(name: &str) -> String {
    let mut out = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if c.is_ascii_uppercase() && prev_lower {
            out.push('_');
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        out.push(c.to_ascii_uppercase());
    }
    out
}
