//! placeholder
#[cfg(test)]
mod scratch {
    use schemars::generate::SchemaSettings;
    #[test]
    fn dump() {
        let mut g = SchemaSettings::draft07().with(|s| { s.definitions_path = "/definitions".into(); s.meta_schema = None; s.transforms.clear(); }).into_generator();
        let _ = g.subschema_for::<poddebug_types::PodDebugContainer>();
        let _ = g.subschema_for::<poddebug_types::PodDebugContainerList>();
        let _ = g.subschema_for::<poddebug_types::DebugProfileList>();
        let _ = g.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>();
        let defs = g.take_definitions(true);
        let mut keys: Vec<_> = defs.keys().cloned().collect(); keys.sort();
        eprintln!("{}", keys.join("\n"));
        for k in ["dev.poddebug.v1alpha1.PodDebugContainer","dev.poddebug.v1alpha1.PodDebugContainerStatus","dev.poddebug.v1alpha1.DebugPhase","dev.poddebug.v1alpha1.DebugProfile","dev.poddebug.v1alpha1.StopRequest","dev.poddebug.v1alpha1.PodDebugContainerList"] {
            eprintln!("{k}: {}", serde_json::to_string_pretty(&defs[k]).unwrap());
        }
        std::fs::write("/tmp/scratch/defs.json", serde_json::to_string_pretty(&defs).unwrap()).unwrap();
    }
}
