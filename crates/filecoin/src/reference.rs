//! The references cuzk's proofs are compared with: bellperson's own prover on the
//! circuits filecoin-proofs builds (byte-identity at fixed `r, s`), and
//! filecoin-proofs' whole `seal_commit_phase2` (the peer in benchmarks).

use std::path::Path;

use blstrs::Scalar;

use crate::shape::{self, Partition, PartitionsUser};
use crate::{C1Input, FilecoinError, PorepKind};

/// Each partition proven by `bellperson::groth16::create_proof` at the given
/// `(r, s)`, with the parameters of `params_path`: N × 192 bytes, partition order.
pub fn prove_with_bellperson(
    input: &C1Input,
    params_path: &Path,
    blinding: &[(Scalar, Scalar)],
) -> Result<Vec<u8>, FilecoinError> {
    let kind = PorepKind::new(input.c1.registered_proof)?;
    let params =
        cuzk_params::read_params(params_path, cuzk_params::Validation::None).map_err(|source| {
            FilecoinError::ParamsRead {
                path: params_path.to_path_buf(),
                source,
            }
        })?;
    struct Prove<'a> {
        params: &'a cuzk_params::Parameters<blstrs::Bls12>,
        blinding: &'a [(Scalar, Scalar)],
    }
    impl PartitionsUser for Prove<'_> {
        type Out = Result<Vec<u8>, String>;
        fn with<
            C: bellpepper_core::Circuit<Scalar> + cuzk_synth::SplitCircuit + Clone + Send + 'static,
        >(
            self,
            partitions: Vec<Partition<C>>,
        ) -> Self::Out {
            if partitions.len() != self.blinding.len() {
                return Err(format!(
                    "{} blinding pairs for {} partitions",
                    self.blinding.len(),
                    partitions.len()
                ));
            }
            let mut out = Vec::new();
            for (p, &(r, s)) in partitions.into_iter().zip(self.blinding) {
                let proof = bellperson::groth16::create_proof(p.circuit, self.params, r, s)
                    .map_err(|e| e.to_string())?;
                proof.write(&mut out).map_err(|e| e.to_string())?;
            }
            Ok(out)
        }
    }
    shape::with_partitions(
        &kind.config,
        input.c1.clone(),
        kind.name.clone(),
        Prove {
            params: &params,
            blinding,
        },
    )?
    .map_err(|message| FilecoinError::Circuit {
        proof: kind.name,
        message,
    })
}

/// filecoin-proofs' own `seal_commit_phase2` (through filecoin-proofs-api, on the
/// CPU): what a provider runs today. Reads its parameters from
/// `FIL_PROOFS_PARAMETER_CACHE`, and verifies its proof itself.
pub fn filecoin_proofs_c2(
    input: &C1Input,
    prover_id: [u8; 32],
    sector: u64,
) -> Result<Vec<u8>, FilecoinError> {
    let name = input.proof_name();
    filecoin_proofs_api::seal::seal_commit_phase2(input.c1.clone(), prover_id, sector.into())
        .map(|o| o.proof)
        .map_err(|e| FilecoinError::Circuit {
            proof: name,
            message: format!("{e:#}"),
        })
}
